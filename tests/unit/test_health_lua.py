"""The emitted Argo CD health Lua, run by a Lua 5.1 interpreter (Argo CD's gopher-lua is 5.1), on
the statuses the capacity controller's own decision function produces for every row of its
decision table, agreeing with the real kstatus library (tools/kstatus) and with the mapping the
docs (docs/operations/health.md) state: Current = Healthy, InProgress = Progressing, Failed = Degraded; a closed window is
Healthy, Error and HandbackTimedOut are Degraded."""

from __future__ import annotations

from typing import Any

import pytest
from lupa import lua51

from fivespot.api.kinds.scheduled_capacity import Phase
from fivespot.compiler.emit import health
from fivespot.controllers.capacity.decide import decide
from tests import kstatus
from tests.unit.controllers.capacity.test_decide import TABLE

pytestmark = pytest.mark.unit

ARGO_OF_KSTATUS = {"Current": "Healthy", "InProgress": "Progressing", "Failed": "Degraded"}
"""The stated mapping (docs/operations/health.md)."""
UNDER_WAY = ("AwaitingZeroWrite", "AwaitingDrain", "DrainCounterUnreadable")


def stated(obj: dict[str, Any]) -> str:
    """The docs' table (docs/operations/health.md), row by row."""
    status = obj["status"]
    phase = Phase(status["phase"])
    conditions = {c["type"]: c for c in status["conditions"]}
    handback = conditions.get("HandbackComplete", {}).get("reason")
    conflicted = conditions.get("HostGovernanceConflict", {}).get("status") == "True"
    if phase in (Phase.ERROR, Phase.HANDBACK_TIMED_OUT) or handback == "HandbackTimedOut":
        return "Degraded"
    if conflicted and phase not in (Phase.TERMINATED, Phase.DISABLED):
        return "Degraded"
    if phase in (Phase.HANDING_BACK, Phase.PENDING) or handback in UNDER_WAY:
        return "Progressing"
    if conditions["Ready"]["reason"] == "ScheduleNeverResolved":
        return "Progressing"
    return "Healthy"  # Active; Inactive (a closed window); Disabled, Terminated once handed back


def _to_lua(runtime: Any, value: Any) -> Any:
    if isinstance(value, dict):
        return runtime.table_from({k: _to_lua(runtime, v) for k, v in value.items()})
    if isinstance(value, list):
        return runtime.table_from([_to_lua(runtime, v) for v in value])
    return value


def argo_health(script: str, obj: dict[str, Any]) -> tuple[str, str]:
    """Run `script` as Argo CD does: `obj` a global table, the script's return value the health."""
    runtime = lua51.LuaRuntime(unpack_returned_tuples=False)
    assert runtime.execute("return _VERSION") == "Lua 5.1"
    runtime.globals().obj = _to_lua(runtime, obj)
    result = runtime.execute(script)
    return str(result["status"]), str(result["message"])


def scheduled_capacity(status: dict[str, Any] | None, generation: int = 1, **meta: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
                           "metadata": {"name": "cap", "namespace": "agents", "generation": generation,
                                        **meta}}
    if status is not None:
        obj["status"] = status
    return obj


def _decided() -> list[tuple[str, Phase, dict[str, Any]]]:
    rows = []
    for row in TABLE:
        inp = row.input()
        status = decide(inp).status.model_dump(mode="json", by_alias=True, exclude_none=True)
        rows.append((row.id, row.phase, scheduled_capacity(status, generation=inp.generation)))
    return rows


DECIDED = _decided()


def test_the_table_covers_every_phase() -> None:
    assert {phase for _, phase, _ in DECIDED} == set(Phase)


@pytest.fixture(scope="module")
def kstatus_of() -> dict[str, str]:
    return dict(zip([row_id for row_id, _, _ in DECIDED],
                    kstatus.verdicts([obj for _, _, obj in DECIDED]), strict=True))


@pytest.mark.parametrize("row_id,phase,obj", DECIDED, ids=[row_id for row_id, _, _ in DECIDED])
def test_argo_cd_and_kstatus_read_every_decided_status_as_the_readme_maps_it(
        row_id: str, phase: Phase, obj: dict[str, Any], kstatus_of: dict[str, str]) -> None:
    status, message = argo_health(health.KSTATUS_LUA, obj)
    assert status == ARGO_OF_KSTATUS[kstatus_of[row_id]], message
    assert status == stated(obj), message
    assert message.startswith(f"{phase.value}: ")


def test_a_closed_window_is_healthy_and_error_is_degraded_in_both(kstatus_of: dict[str, str]) -> None:
    inactive = [row_id for row_id, phase, obj in DECIDED if phase is Phase.INACTIVE
                and obj["status"]["conditions"][0]["reason"] == "ScheduleInactive"]
    errors = [row_id for row_id, phase, _ in DECIDED if phase in (Phase.ERROR, Phase.HANDBACK_TIMED_OUT)]
    assert inactive and errors
    assert {kstatus_of[r] for r in inactive} == {"Current"}
    assert {kstatus_of[r] for r in errors} == {"Failed"}


def test_an_unobserved_generation_and_a_deletion_are_progressing_in_both() -> None:
    settled = next(obj for _, phase, obj in DECIDED if phase is Phase.ACTIVE)
    stale = {**settled, "metadata": {**settled["metadata"], "generation": 2}}
    deleting = {**settled, "metadata": {**settled["metadata"], "deletionTimestamp": "2026-03-02T09:00:00Z"}}
    assert argo_health(health.KSTATUS_LUA, stale)[0] == "Progressing"
    assert argo_health(health.KSTATUS_LUA, deleting) == ("Progressing", "being deleted")
    assert kstatus.verdicts([stale, deleting]) == ["InProgress", "Terminating"]


def test_no_status_yet_is_progressing_in_argo_cd_where_kstatus_cannot_tell() -> None:
    fresh = scheduled_capacity(None)
    assert argo_health(health.KSTATUS_LUA, fresh)[0] == "Progressing"
    assert kstatus.verdicts([fresh]) == ["Current"]  # the one stated difference (docs/operations/health.md)


@pytest.mark.parametrize("conditions,generation,observed,expected", [
    ([{"type": "Ready", "status": "True", "reason": "Published"}], 1, 1, "Healthy"),
    ([{"type": "Ready", "status": "False", "reason": "InvalidSpec"},
      {"type": "Stalled", "status": "True", "reason": "InvalidSpec", "message": "fix spec.days"}], 1, 1, "Degraded"),
    ([{"type": "Ready", "status": "False", "reason": "NotYet"}], 1, 1, "Progressing"),
    ([{"type": "Ready", "status": "True"}], 2, 1, "Progressing"),
    ([], 1, 1, "Healthy"),
])
def test_a_provider_status_reads_the_same_in_argo_cd_and_kstatus(
        conditions: list[dict[str, str]], generation: int, observed: int, expected: str) -> None:
    obj = {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "ManualSchedule",
           "metadata": {"name": "window", "namespace": "agents", "generation": generation},
           "status": {"active": True, "observedGeneration": observed, "conditions": conditions}}
    assert argo_health(health.KSTATUS_LUA, obj)[0] == expected
    assert ARGO_OF_KSTATUS[kstatus.verdicts([obj])[0]] == expected


def _configuration(labels: dict[str, str], *bundles: str | None) -> dict[str, Any]:
    hooks = [{"name": f"h{i}.5spot.finos.org",
              "clientConfig": {"service": {"name": "fivespot-webhook"},
                               **({"caBundle": b} if b is not None else {})}}
             for i, b in enumerate(bundles)]
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "fivespot-webhook", "labels": labels}, "webhooks": hooks}


OURS = {"app.kubernetes.io/part-of": "fivespot"}


@pytest.mark.parametrize("labels,bundles,expected", [
    (OURS, (None, None), "Progressing"),
    (OURS, ("Y2E=", ""), "Progressing"),
    (OURS, ("Y2E=", "Y2E="), "Healthy"),
    ({}, (None,), "Healthy"),
])
def test_the_webhook_configuration_is_healthy_once_every_webhook_has_a_ca_bundle(
        labels: dict[str, str], bundles: tuple[str | None, ...], expected: str) -> None:
    status, message = argo_health(health.WEBHOOK_CONFIGURATION_LUA, _configuration(labels, *bundles))
    assert status == expected, message
    if expected == "Progressing":
        assert "waiting for the caBundle of" in message
