"""One provider reconcile as a pure plan: what to write (guarded by the resourceVersion read)
and how long until the next boundary; and the command's refusals before anything starts."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, cast

import pytest

from fivespot.compiler.emit.bundle import bundle
from fivespot.compiler.pipeline import load
from fivespot.controllers.spotschedules import manual, time_based
from fivespot.controllers.spotschedules.cli import main
from fivespot.controllers.spotschedules.controller import PROVIDER_TYPES, ProviderReconciler, bundle_lists
from fivespot.controllers.spotschedules.reconcile import plan
from fivespot.runtime.manager import Manager
from fivespot.runtime.reconcile import Request, Result, requeue_after

UTC = dt.timezone.utc
ROOT = Path(__file__).resolve().parents[4]
NOW = dt.datetime(2026, 3, 4, 10, 15, 30, tzinfo=UTC)  # a Wednesday


def _obj(spec: Any, status: Any = None, generation: Any = 3, rv: str | None = "812") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "s", "namespace": "n", "generation": generation}
    if rv is not None:
        metadata["resourceVersion"] = rv
    obj: dict[str, Any] = {"metadata": metadata, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


def test_a_changed_status_is_patched_with_the_resource_version_it_was_computed_from() -> None:
    decided = plan(_obj({"enabled": True}), manual.evaluate, NOW)
    assert decided.patch is not None
    assert decided.patch["metadata"] == {"resourceVersion": "812"}
    assert decided.patch["status"]["active"] is True
    assert decided.patch["status"]["observedGeneration"] == 3
    assert decided.requeue_after_s is None


def test_an_unchanged_status_is_not_written_at_all() -> None:
    first = plan(_obj({"enabled": True}), manual.evaluate, NOW)
    assert first.patch is not None
    published = first.patch["status"]
    again = plan(_obj({"enabled": True}, status=published), manual.evaluate,
                 NOW + dt.timedelta(hours=5))
    assert again.patch is None


def test_a_time_window_is_requeued_exactly_at_its_next_boundary() -> None:
    spec = {"daysOfWeek": ["mon-fri"], "hoursOfDay": ["9-17"], "timezone": "UTC"}
    decided = plan(_obj(spec), time_based.evaluate, NOW)
    assert decided.requeue_at == dt.datetime(2026, 3, 4, 18, 0, tzinfo=UTC)
    assert decided.requeue_after_s == (7 * 3600 + 44 * 60 + 30)


def test_an_invalid_spec_is_planned_as_ready_false_with_no_requeue() -> None:
    spec = {"daysOfWeek": ["mon-funday"], "hoursOfDay": ["9"], "timezone": "UTC"}
    decided = plan(_obj(spec), time_based.evaluate, NOW)
    assert decided.patch is not None
    ready = decided.patch["status"]["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "InvalidSpec")
    assert "spec.daysOfWeek[0]" in ready["message"]
    assert decided.requeue_after_s is None


@pytest.mark.parametrize("spec", [None, "enabled", ["x"]])
def test_a_missing_or_non_object_spec_is_reported_not_raised(spec: Any) -> None:
    decided = plan(_obj(spec), manual.evaluate, NOW)
    assert decided.patch is not None
    assert decided.patch["status"]["conditions"][0]["status"] == "False"


@pytest.mark.parametrize("generation", [None, "3", True, -1])
def test_a_malformed_generation_is_published_as_zero(generation: Any) -> None:
    decided = plan(_obj({"enabled": False}, generation=generation), manual.evaluate, NOW)
    assert decided.patch is not None
    assert decided.patch["status"]["observedGeneration"] == 0


def test_an_object_without_resource_version_is_patched_without_a_precondition() -> None:
    decided = plan(_obj({"enabled": False}, rv=None), manual.evaluate, NOW)
    assert decided.patch is not None and "metadata" not in decided.patch


def test_a_boundary_already_past_is_due_at_once() -> None:
    assert requeue_after(NOW - dt.timedelta(seconds=2), NOW) == 0.0
    assert requeue_after(NOW + dt.timedelta(milliseconds=250), NOW) == 0.25
    assert requeue_after(None, NOW) is None


def test_the_example_bundle_installs_all_four_providers_and_nothing_else_is_assumed() -> None:
    compiled = bundle(load(ROOT / "examples" / "agent-sandbox" / "config"))
    assert all(bundle_lists(compiled, p) for p in PROVIDER_TYPES.values())
    only_manual = compiled.model_copy(update={"providers": tuple(
        p for p in compiled.providers if p.kind == "ManualSchedule")})
    assert [bundle_lists(only_manual, PROVIDER_TYPES[c]) for c in sorted(PROVIDER_TYPES)] == \
        [False, False, True, False]


def test_the_command_refuses_a_provider_the_bundle_does_not_install(tmp_path: Path) -> None:
    compiled = bundle(load(ROOT / "examples" / "agent-sandbox" / "config"))
    compiled = compiled.model_copy(update={"providers": tuple(
        p for p in compiled.providers if p.kind == "ManualSchedule")})
    path = tmp_path / "bundle.json"
    path.write_text(compiled.to_json())
    assert main(["time-based", "--bundle", str(path), "--kubeconfig", "/nonexistent"]) == 2


def test_the_command_refuses_an_unreadable_bundle(tmp_path: Path) -> None:
    path = tmp_path / "bundle.json"
    path.write_text("{not json")
    assert main(["manual", "--bundle", str(path), "--kubeconfig", "/nonexistent"]) == 2


class _Manager:
    """What a ProviderReconciler asks of its Manager, recorded (the reconcile's shell only)."""

    component = "fivespot-provider-time-based"

    def __init__(self) -> None:
        self.clock = self
        self.written: list[dict[str, Any]] = []
        self.due: list[tuple[str, dt.datetime | None]] = []

    def now(self) -> dt.datetime:
        return NOW

    def reconcile(self, kind: object, reconciler: object) -> None:
        return None

    def write(self, key: str, obj: object, patch: dict[str, Any]) -> None:
        self.written.append(patch)

    def record(self, *args: object) -> None:
        return None

    def expect_write(self, key: str, at: dt.datetime | None) -> None:
        self.due.append((key, at))

    def requeue_at(self, at: dt.datetime | None, *, slack_s: float) -> Result:
        return Result(requeue_after_s=requeue_after(at, NOW, slack_s))


def test_a_provider_tells_its_manager_its_next_boundary_is_a_write_due_then() -> None:
    mgr = _Manager()
    reconciler = ProviderReconciler(cast(Manager, mgr), PROVIDER_TYPES["time-based"])
    spec = {"daysOfWeek": ["mon-fri"], "hoursOfDay": ["9-17"], "timezone": "UTC"}
    result = reconciler.reconcile(Request("n", "s", "p", lambda: _obj(spec)))
    assert mgr.written and mgr.written[0]["status"]["active"] is True
    assert mgr.due == [("n/s", dt.datetime(2026, 3, 4, 18, 0, tzinfo=UTC))]
    assert result is not None and result.requeue_after_s == 7 * 3600 + 44 * 60 + 30
