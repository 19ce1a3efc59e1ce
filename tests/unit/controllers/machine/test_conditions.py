"""ScheduledMachine's kstatus conditions, phase by phase, from `decide` alone, and how the real
kstatus (tools/kstatus, what Flux `wait` runs) and the emitted Argo CD health Lua (Lua 5.1) read
each decided status — as the docs' ScheduledMachine table states (docs/operations/health.md): settled (Active, Inactive,
Disabled, Terminated) is Current / Healthy, on its way is InProgress / Progressing, Error is
Failed / Degraded."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from fivespot.api.kinds.machine_lifecycle import MachinePhase
from fivespot.compiler.emit import health
from fivespot.controllers.machine.decide import Cordon, Create, Decision, Part, action_failed
from fivespot.controllers.machine.observations import (
    Foreign,
    NodeGone,
    NodeSeen,
    Owned,
    PodOnNode,
    Resolved,
    Unresolved,
    UnresolvedReason,
)
from tests import kstatus
from tests.unit.test_health_lua import ARGO_OF_KSTATUS, argo_health
from tests.unit.controllers.machine.test_decide import (
    BOOT,
    INFRA,
    MACHINE,
    T0,
    active_prior,
    given,
    shutting_down,
    then,
)

pytestmark = pytest.mark.unit

KSTATUS = ("Ready", "Reconciling", "Stalled")
BLOCKED = NodeSeen("node-1", cordoned=True, tainted=True, pods=(PodOnNode("apps", "db-0"),))


def kstatus_conditions(decision: Decision) -> dict[str, tuple[str, str]]:
    """Ready, Reconciling and Stalled as (status, reason), only those present."""
    return {c.type: (c.status.value, c.reason) for c in decision.status.conditions if c.type in KSTATUS}


# --- one decision per state, each a step a real machine goes through -----------------------------


def creating() -> Decision:
    return then(given())


def awaiting_node() -> Decision:
    return then(given(machine=Owned("rack-1", "uid-m"), bootstrap=BOOT, infrastructure=INFRA))


def recreating() -> Decision:
    return then(given(machine=Owned("rack-1", "uid-m", deleting=True), bootstrap=BOOT,
                      infrastructure=INFRA))


def active() -> Decision:
    return then(given(machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA))


def held_while_unresolved() -> Decision:
    return then(given(schedule=Unresolved(UnresolvedReason.NOT_READY, "Ready=False"),
                      prior=active_prior(), machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA))


def in_grace() -> Decision:
    return shutting_down(timedelta(seconds=10))


def draining() -> Decision:
    return shutting_down(timedelta(minutes=1), BLOCKED)


def drain_timed_out() -> Decision:
    return shutting_down(timedelta(minutes=6), BLOCKED, prior=draining().status)


def deleting_the_machine() -> Decision:
    drained = shutting_down(timedelta(minutes=2), NodeGone())
    return then(given(schedule=Resolved(False), prior=drained.status,
                      machine=Owned("rack-1", "uid-m", deleting=True, node="node-1"),
                      bootstrap=BOOT, infrastructure=INFRA, now=T0 + timedelta(minutes=2, seconds=5)))


def deleting_its_objects() -> Decision:
    return then(given(schedule=Resolved(False), prior=deleting_the_machine().status, bootstrap=BOOT,
                      infrastructure=INFRA, now=T0 + timedelta(minutes=3)))


def inactive() -> Decision:
    return then(given(schedule=Resolved(False), prior=deleting_its_objects().status,
                      now=T0 + timedelta(minutes=4)))


def inactive_from_the_start() -> Decision:
    return then(given(schedule=Resolved(False)))


def never_resolved() -> Decision:
    return then(given(schedule=Unresolved(UnresolvedReason.NOT_FOUND, "no such object")))


def disabled() -> Decision:
    shutting = then(given(spec={"enabled": False}, prior=active_prior(), machine=MACHINE,
                          bootstrap=BOOT, infrastructure=INFRA))
    return then(given(spec={"enabled": False}, prior=shutting.status))


def terminating() -> Decision:
    return then(given(spec={"killSwitch": True}, prior=active_prior(), machine=MACHINE,
                      bootstrap=BOOT, infrastructure=INFRA))


def terminated() -> Decision:
    return then(given(spec={"killSwitch": True}, prior=terminating().status,
                      now=T0 + timedelta(seconds=30)))


def name_taken() -> Decision:
    return then(given(machine=Foreign("rack-1")))


def not_allowed() -> Decision:
    return then(given(refusal="cluster other is not declared in MachineProvisioning"))


def create_rejected() -> Decision:
    return action_failed(given(), creating(), Create(Part.BOOTSTRAP),
                         "spec: Invalid value: 0: spec in body should have at least 1 properties")


def cordon_forbidden() -> Decision:
    inp = given(schedule=Resolved(False), prior=in_grace().status, machine=MACHINE, bootstrap=BOOT,
                infrastructure=INFRA, node=NodeSeen("node-1", cordoned=False, tainted=False, pods=()),
                now=T0 + timedelta(minutes=2))
    return action_failed(inp, then(inp), Cordon("node-1"), 'nodes "node-1" is forbidden')


# state: (builder, phase, kstatus conditions, kstatus verdict) — the docs' ScheduledMachine table
STATES: dict[str, tuple[Callable[[], Decision], MachinePhase, dict[str, tuple[str, str]], str]] = {
    "creating": (creating, MachinePhase.PENDING,
                 {"Ready": ("False", "AwaitingNode"), "Reconciling": ("True", "CreatingMachine")}, "InProgress"),
    "awaiting-node": (awaiting_node, MachinePhase.PENDING,
                      {"Ready": ("False", "AwaitingNode"), "Reconciling": ("True", "AwaitingNode")}, "InProgress"),
    "recreating": (recreating, MachinePhase.PENDING,
                   {"Ready": ("False", "AwaitingMachineDeletion"),
                    "Reconciling": ("True", "AwaitingMachineDeletion")}, "InProgress"),
    "active": (active, MachinePhase.ACTIVE, {"Ready": ("True", "InSchedule")}, "Current"),
    "held-while-unresolved": (held_while_unresolved, MachinePhase.ACTIVE,
                              {"Ready": ("True", "InSchedule")}, "Current"),
    "in-grace": (in_grace, MachinePhase.SHUTTING_DOWN,
                 {"Ready": ("False", "ScheduleInactive"), "Reconciling": ("True", "GracefulShutdown")},
                 "InProgress"),
    "draining": (draining, MachinePhase.SHUTTING_DOWN,
                 {"Ready": ("False", "ScheduleInactive"), "Reconciling": ("True", "Draining")}, "InProgress"),
    "drain-timed-out": (drain_timed_out, MachinePhase.SHUTTING_DOWN,
                        {"Ready": ("False", "ScheduleInactive"),
                         "Reconciling": ("True", "AwaitingMachineDeletion")},
                        "InProgress"),
    "deleting-the-machine": (deleting_the_machine, MachinePhase.SHUTTING_DOWN,
                             {"Ready": ("False", "ScheduleInactive"),
                              "Reconciling": ("True", "AwaitingMachineDeletion")}, "InProgress"),
    "deleting-its-objects": (deleting_its_objects, MachinePhase.INACTIVE,
                             {"Ready": ("False", "ScheduleInactive"),
                              "Reconciling": ("True", "AwaitingObjectDeletion")}, "InProgress"),
    "inactive": (inactive, MachinePhase.INACTIVE, {"Ready": ("True", "ScheduleInactive")}, "Current"),
    "inactive-from-the-start": (inactive_from_the_start, MachinePhase.INACTIVE,
                                {"Ready": ("True", "ScheduleInactive")}, "Current"),
    "never-resolved": (never_resolved, MachinePhase.INACTIVE,
                       {"Ready": ("False", "ScheduleNeverResolved"),
                        "Reconciling": ("True", "ScheduleNeverResolved")}, "InProgress"),
    "disabled": (disabled, MachinePhase.DISABLED, {"Ready": ("True", "Disabled")}, "Current"),
    "terminating": (terminating, MachinePhase.TERMINATED,
                    {"Ready": ("False", "KillSwitch"), "Reconciling": ("True", "AwaitingMachineDeletion")},
                    "InProgress"),
    "terminated": (terminated, MachinePhase.TERMINATED, {"Ready": ("True", "KillSwitch")}, "Current"),
    "name-taken": (name_taken, MachinePhase.ERROR,
                   {"Ready": ("False", "NameTaken"), "Stalled": ("True", "NameTaken")}, "Failed"),
    "not-allowed": (not_allowed, MachinePhase.ERROR,
                    {"Ready": ("False", "NotAllowedByPlatform"), "Stalled": ("True", "NotAllowedByPlatform")},
                    "Failed"),
    "create-rejected": (create_rejected, MachinePhase.ERROR,
                        {"Ready": ("False", "CreateRejected"), "Stalled": ("True", "CreateRejected")}, "Failed"),
    "cordon-forbidden": (cordon_forbidden, MachinePhase.SHUTTING_DOWN,
                         {"Ready": ("False", "ActionFailed"), "Stalled": ("True", "ActionFailed")}, "Failed"),
}


# --- the behaviours, one sentence each ----------------------------------------------------------


def test_an_active_machine_is_ready_and_neither_reconciling_nor_stalled() -> None:
    assert kstatus_conditions(active()) == {"Ready": ("True", "InSchedule")}


def test_a_pending_machine_is_reconciling_until_it_has_a_node() -> None:
    assert kstatus_conditions(creating())["Reconciling"] == ("True", "CreatingMachine")
    assert kstatus_conditions(awaiting_node())["Reconciling"] == ("True", "AwaitingNode")


def test_a_shutting_down_machine_is_reconciling_and_names_the_step() -> None:
    assert kstatus_conditions(in_grace())["Reconciling"] == ("True", "GracefulShutdown")
    assert kstatus_conditions(draining())["Reconciling"] == ("True", "Draining")
    assert kstatus_conditions(deleting_the_machine())["Reconciling"] == ("True", "AwaitingMachineDeletion")


def test_an_inactive_machine_is_ready_and_not_reconciling() -> None:
    assert kstatus_conditions(inactive()) == {"Ready": ("True", "ScheduleInactive")}
    assert kstatus_conditions(inactive_from_the_start()) == {"Ready": ("True", "ScheduleInactive")}


def test_an_inactive_machine_still_deleting_its_objects_is_reconciling() -> None:
    assert kstatus_conditions(deleting_its_objects())["Reconciling"] == ("True", "AwaitingObjectDeletion")


def test_a_disabled_machine_is_ready_once_its_machine_is_gone() -> None:
    assert kstatus_conditions(disabled()) == {"Ready": ("True", "Disabled")}


def test_a_killed_machine_is_reconciling_until_its_machine_is_gone_then_ready() -> None:
    assert kstatus_conditions(terminating())["Reconciling"] == ("True", "AwaitingMachineDeletion")
    assert kstatus_conditions(terminated()) == {"Ready": ("True", "KillSwitch")}


def test_a_schedule_that_never_resolved_is_reconciling_as_on_scheduled_capacity() -> None:
    assert kstatus_conditions(never_resolved()) == {"Ready": ("False", "ScheduleNeverResolved"),
                                                   "Reconciling": ("True", "ScheduleNeverResolved")}


def test_a_refused_machine_is_stalled_and_not_reconciling() -> None:
    for refused in (name_taken(), not_allowed(), create_rejected()):
        assert refused.status.phase is MachinePhase.ERROR
        assert set(kstatus_conditions(refused)) == {"Ready", "Stalled"}


def test_an_action_the_api_server_refuses_for_good_is_stalled_and_keeps_the_phase() -> None:
    failed = cordon_forbidden()
    assert failed.status.phase is MachinePhase.SHUTTING_DOWN
    assert kstatus_conditions(failed) == {"Ready": ("False", "ActionFailed"), "Stalled": ("True", "ActionFailed")}


def test_reconciling_is_dropped_and_ready_flips_when_the_machine_settles() -> None:
    grace = in_grace()
    reopened = then(given(prior=grace.status, machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA,
                          now=T0 + timedelta(seconds=20)))
    assert kstatus_conditions(reopened) == {"Ready": ("True", "InSchedule")}
    ready = reopened.status.condition("Ready")
    assert ready is not None and ready.last_transition_time == T0 + timedelta(seconds=20)


def test_a_recovered_machine_drops_stalled() -> None:
    fixed = then(given(prior=name_taken().status, machine=None, now=T0 + timedelta(minutes=1)))
    assert "Stalled" not in kstatus_conditions(fixed)


def test_every_status_and_condition_carries_the_generation_it_was_computed_from() -> None:
    for decided in (then(given(generation=7)), then(given(generation=7, schedule=Resolved(False))),
                    then(given(generation=7, machine=Foreign("rack-1")))):
        assert decided.status.observed_generation == 7
        assert {c.observed_generation for c in decided.status.conditions} == {7}


# --- the table, as kstatus and Argo CD read it -------------------------------------------------


def _object(decision: Decision) -> dict[str, Any]:
    return {"apiVersion": "5spot.finos.org/v1beta1", "kind": "ScheduledMachine",
            "metadata": {"name": "rack-1", "namespace": "trading", "generation": 1},
            "status": decision.status.model_dump(mode="json", by_alias=True, exclude_none=True)}


DECIDED = {state: (phase, conditions, verdict, _object(build()))
           for state, (build, phase, conditions, verdict) in STATES.items()}


def test_the_table_covers_every_phase() -> None:
    assert {phase for phase, _, _, _ in DECIDED.values()} == set(MachinePhase)


@pytest.fixture(scope="module")
def kstatus_of() -> dict[str, str]:
    return dict(zip(DECIDED, kstatus.verdicts([obj for _, _, _, obj in DECIDED.values()]), strict=True))


@pytest.mark.parametrize("state", list(STATES))
def test_each_decided_status_has_the_stated_conditions_and_reads_alike_in_kstatus_and_argo_cd(
        state: str, kstatus_of: dict[str, str]) -> None:
    phase, conditions, verdict, obj = DECIDED[state]
    assert obj["status"]["phase"] == phase.value
    assert {c["type"]: (c["status"], c["reason"]) for c in obj["status"]["conditions"]
            if c["type"] in KSTATUS} == conditions
    argo, message = argo_health(health.KSTATUS_LUA, obj)
    assert kstatus_of[state] == verdict, obj["status"]["conditions"]
    assert argo == ARGO_OF_KSTATUS[verdict], message
    assert message.startswith(f"{phase.value}: ")
