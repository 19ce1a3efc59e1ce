"""The machine controller's whole judgement, as one pure function: `decide(DecisionInput)`.

The shell observes (spec, provider, the CAPI objects by their chosen names, and — only when the
decision asks for it with `needs_node` — the node and its pods in the workload cluster), calls
`decide`, performs `actions` in order (stopping at the first that fails, to retry), then writes
`status` and records `events`. All state is in status, so a restart loses nothing: the objects
have fixed names (a second create is an AlreadyExists, never a second Machine) and the shutdown
clocks (`shutdownStartedAt`, `drainStartedAt`) are latched there.

Rules, in order of precedence:

1. Refusal (phase Error, nothing created or deleted): a spec the model rejects, a cluster or an
   embedded kind the bundle does not allow, or an object with a chosen name that this
   ScheduledMachine does not own (never touched: it is someone else's).
2. Transient lookups flip nothing: a CAPI object that could not be read returns the prior status
   and `transient` (retry with backoff). A provider lookup that failed is transient too — also
   on a first reconcile, so a restart's cold caches never read as "never resolved" — unless the
   answer does not depend on it (kill switch, disabled).
3. `killSwitch` -> Terminated: the Machine is deleted at once (no grace, no drain), then the
   bootstrap and infrastructure objects. Reported with a Warning event.
4. Out of schedule (provider inactive, or never resolved; or `enabled: false` -> Disabled): the
   shutdown starts (`shutdownStartedAt`), waits `gracefulShutdownTimeout`, then the drain starts
   (`drainStartedAt`): the node is cordoned and tainted `5spot.finos.org/shutting-down:NoSchedule`,
   its pods are evicted through the Eviction API as `kubectl drain --ignore-daemonsets` would
   (PodDisruptionBudgets respected: a refused eviction is retried), and once no such pod is left,
   or `nodeDrainTimeout` after the drain started, the Machine is deleted; then the bootstrap and
   infrastructure objects. Inactive (or Disabled) once everything is gone. A machine that never
   got a node is deleted after the grace period with nothing to drain; a workload cluster that
   cannot be reached, or whose kubeconfig Secret is refused (`KubeconfigRefused`, with a
   Warning: nothing is sent with it), is retried until `nodeDrainTimeout`, then the Machine is
   deleted anyway (Warning), as CAPI's own nodeDrainTimeout does.
5. In schedule: the bootstrap object, the infrastructure object and the Machine referencing them
   exist (created in that order, owned by the ScheduledMachine); Pending until the Machine has a
   node, then Active. A schedule that reopens during the grace period cancels the
   shutdown; once the drain has begun it is not reversed (the node is going:
   docs/design/contracts/scheduled-machine.md) — the removal completes and a new Machine is
   created.

The schedule follows the provider contract: a resolved provider's `status.active` is followed;
an unresolved one holds the last resolved answer (`status.spotSchedule.active`) and says why in
`SpotScheduleResolved=False`; never resolved means out of schedule, so nothing is created.

Ready, Reconciling and Stalled follow kstatus, as every fivespot kind does (`fivespot.api.conditions`):
Ready=True when settled — Active (InSchedule), Inactive (ScheduleInactive), Disabled, Terminated
(KillSwitch) once the Machine and its objects are gone; Ready=False with Reconciling=True while
the controller is on its way (Pending: CreatingMachine / AwaitingNode / AwaitingMachineDeletion;
ShuttingDown: GracefulShutdown, Draining, WorkloadClusterUnreachable, KubeconfigRefused, then
AwaitingMachineDeletion; AwaitingObjectDeletion; a schedule that has never resolved, as on
ScheduledCapacity); Ready=False with Stalled=True for what needs a person (Error, and an action
the API server refused for a reason a retry will not fix). Reconciling and Stalled are present
only while True.

A ScheduledCapacity naming this machine's node is reported from the capacity side (its
HostGovernanceConflict condition, and a Warning event regarding this ScheduledMachine): the capacity
side holds its value at 0, and this side keeps the machine as the schedule says (one host, one
governor: the machine wins). The machine identity reads no ScheduledCapacity.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final, Literal

from fivespot.api import conditions as cond
from fivespot.api.conditions import Observation
from fivespot.api.kinds.machine_lifecycle import (
    MachinePhase,
    MachineSpec,
    MachineStatus,
    ObjectRef,
    SpotSchedule,
)
from fivespot.api.kinds.scheduled_machine import NodeRef
from fivespot.controllers.machine.observations import (
    DecisionInput,
    Foreign,
    InvalidSpec,
    LookupFailed,
    NodeGone,
    NodeSeen,
    ObjectObservation,
    Owned,
    PodOnNode,
    RefusedKubeconfig,
    Resolved,
    Unresolved,
)

READY: Final = cond.READY
RECONCILING: Final = cond.RECONCILING
STALLED: Final = cond.STALLED
SPOT_SCHEDULE_RESOLVED: Final = cond.SPOT_SCHEDULE_RESOLVED
MACHINE_CREATED: Final = "MachineCreated"
NODE_DRAINED: Final = "NodeDrained"
CONDITION_TYPES: Final = (READY, RECONCILING, STALLED, SPOT_SCHEDULE_RESOLVED, MACHINE_CREATED,
                          NODE_DRAINED)
"""Every condition the controller sets, in the order it reports them."""

POLL: Final = timedelta(seconds=5)
"""How soon to look again while waiting on something no watch reports (evictions, deletions of
bootstrap/infrastructure objects, an unreachable workload cluster)."""
RECHECK: Final = timedelta(seconds=1)
CLEANUP_SLACK: Final = timedelta(minutes=10)
"""How long a deleted ScheduledMachine's Machine, bootstrap and infrastructure objects may take to
go, on top of its gracefulShutdownTimeout and nodeDrainTimeout, before the finalizer is removed
anyway (FinalizerCleanupTimedOut): a Machine stuck in CAPI's own deletion must not leave the
ScheduledMachine undeletable forever."""
"""How soon to list the node's pods again after cordoning it."""


class Reason:
    IN_SCHEDULE: Final = "InSchedule"
    CREATING: Final = "CreatingMachine"
    AWAITING_NODE: Final = "AwaitingNode"
    MACHINE_DELETING: Final = "AwaitingMachineDeletion"
    OBJECTS_DELETING: Final = "AwaitingObjectDeletion"
    SCHEDULE_INACTIVE: Final = "ScheduleInactive"
    SCHEDULE_NEVER_RESOLVED: Final = "ScheduleNeverResolved"
    DISABLED: Final = "Disabled"
    KILL_SWITCH: Final = "KillSwitch"
    GRACE_PERIOD: Final = "GracefulShutdown"
    DRAINING: Final = "Draining"
    DRAINED: Final = "Drained"
    DRAIN_TIMED_OUT: Final = "DrainTimedOut"
    NO_NODE: Final = "NoNode"
    NOT_DRAINING: Final = "NotDraining"
    WORKLOAD_UNREACHABLE: Final = "WorkloadClusterUnreachable"
    KUBECONFIG_REFUSED: Final = "KubeconfigRefused"
    CREATED: Final = "Created"
    NOT_CREATED: Final = "NotCreated"
    RESOLVED: Final = "Resolved"
    SCHEDULE_LOOKUP_FAILED: Final = "ScheduleLookupFailed"
    INVALID_SPEC: Final = "InvalidSpec"
    NOT_ALLOWED: Final = "NotAllowedByPlatform"
    NAME_TAKEN: Final = "NameTaken"
    DELETING: Final = "Deleting"
    DELETED_WHILE_REFUSED: Final = "DeletedWhileRefused"
    CLEANUP_TIMED_OUT: Final = "FinalizerCleanupTimedOut"
    SHUTDOWN_CANCELLED: Final = "ShutdownCancelled"
    SHUTDOWN_STARTED: Final = "ShutdownStarted"
    DRAIN_STARTED: Final = "DrainStarted"
    MACHINE_DELETED: Final = "MachineDeleted"
    REOPENED_WHILE_DRAINING: Final = "ReopenedWhileDraining"
    CREATE_REJECTED: Final = "CreateRejected"
    ACTION_FAILED: Final = "ActionFailed"


class Part(StrEnum):
    """The three objects the controller creates, in creation order."""

    BOOTSTRAP = "bootstrap"
    INFRASTRUCTURE = "infrastructure"
    MACHINE = "machine"


@dataclass(frozen=True)
class Create:
    part: Part


@dataclass(frozen=True)
class Delete:
    part: Part


@dataclass(frozen=True)
class Cordon:
    """Mark the node unschedulable and add the shutting-down taint (one node patch)."""

    node: str


@dataclass(frozen=True)
class Evict:
    """Ask the Eviction API for each pod; a refusal (a PodDisruptionBudget) is not a failure."""

    pods: tuple[PodOnNode, ...]


@dataclass(frozen=True)
class AddFinalizer:
    """Put the controller's finalizer on the ScheduledMachine, before anything is created: from
    then on a delete waits until the machine has left the cluster the safe way."""


Action = Create | Delete | Cordon | Evict | AddFinalizer


@dataclass(frozen=True)
class Event:
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True)
class Decision:
    actions: tuple[Action, ...]
    status: MachineStatus
    requeue_at: datetime | None
    events: tuple[Event, ...]
    transient: str | None = None
    needs_node: bool = False
    """The shell must observe the node (and its pods) and decide again."""
    resolution_error: str | None = None
    """The reason the provider did not resolve, for `fivespot_spot_schedule_resolution_errors_total`."""
    release: bool = False
    """Remove the finalizer once the status and events are written: a deleted ScheduledMachine's
    cleanup is done (or past its bound), so the object may go."""


# --- the schedule ---------------------------------------------------------------------------


def spot_schedule(inp: DecisionInput) -> SpotSchedule:
    """The provider's answer to record: resolved, or the last resolved one held with the reason."""
    prior = inp.prior.spot_schedule if inp.prior is not None else None
    held = prior.active if prior is not None else None
    since = prior.last_transition_time if prior is not None else None
    obs = inp.schedule
    if isinstance(obs, Resolved):
        changed = held is None or held != obs.active
        return SpotSchedule(resolved=True, active=obs.active, reason=Reason.RESOLVED,
                            message=f"the provider reports active={str(obs.active).lower()}",
                            provider_generation=inp.provider_generation,
                            last_transition_time=inp.now if changed else since)
    if isinstance(obs, Unresolved):
        return SpotSchedule(resolved=False, active=held, reason=obs.reason.value,
                            message=_held(obs.message, held),
                            provider_generation=inp.provider_generation,
                            last_transition_time=since)
    return SpotSchedule(resolved=False, active=held, reason=Reason.SCHEDULE_LOOKUP_FAILED,
                        message=_held(obs.message, held), provider_generation=inp.provider_generation,
                        last_transition_time=since)


def _held(message: str, held: bool | None) -> str:
    if held is None:
        return f"{message}; never resolved, so the machine stays out of the cluster"
    return f"{message}; holding the last resolved answer active={str(held).lower()}"


def _schedule_condition(spot: SpotSchedule) -> Observation:
    if spot.resolved:
        return cond.true(SPOT_SCHEDULE_RESOLVED, Reason.RESOLVED, spot.message)
    return cond.false(SPOT_SCHEDULE_RESOLVED, spot.reason, spot.message)


# --- helpers --------------------------------------------------------------------------------


def _owned(obs: object) -> Owned | None:
    return obs if isinstance(obs, Owned) else None


def _ref(inp: DecisionInput, part: Part) -> ObjectRef | None:
    obs = {Part.MACHINE: inp.machine, Part.BOOTSTRAP: inp.bootstrap,
           Part.INFRASTRUCTURE: inp.infrastructure}[part]
    if not isinstance(obs, Owned) or isinstance(inp.spec, InvalidSpec):
        return None
    api_version, kind = {
        Part.MACHINE: (inp.machine_api_version, "Machine"),
        Part.BOOTSTRAP: (inp.spec.bootstrap_spec.api_version, inp.spec.bootstrap_spec.kind),
        Part.INFRASTRUCTURE: (inp.spec.infrastructure_spec.api_version,
                              inp.spec.infrastructure_spec.kind)}[part]
    return ObjectRef(api_version=api_version, kind=kind, name=obs.name, namespace=inp.namespace,
                     uid=obs.uid or None)


def _status(inp: DecisionInput, phase: MachinePhase, message: str, observations: list[Observation],
            **fields: object) -> MachineStatus:
    """The new status: the prior one with these fields, the references of what exists now, and
    the conditions merged (lastTransitionTime moves only on a flip). Validated, so a value of
    the wrong shape fails here rather than in the API server."""
    prior = inp.prior or MachineStatus()
    conditions = cond.merge(prior.conditions, tuple(observations), inp.now, inp.generation,
                            CONDITION_TYPES)
    data = prior.model_dump(by_alias=False)
    data.update({"phase": phase, "message": message[:1024], "observed_generation": inp.generation,
                 "conditions": conditions, "machine_ref": _ref(inp, Part.MACHINE),
                 "bootstrap_ref": _ref(inp, Part.BOOTSTRAP),
                 "infrastructure_ref": _ref(inp, Part.INFRASTRUCTURE)})
    data.update(fields)
    return MachineStatus.model_validate(
        {k: (v.model_dump(by_alias=False) if hasattr(v, "model_dump") else v)
         for k, v in data.items()})


def _phase_event(inp: DecisionInput, phase: MachinePhase, reason: str, message: str,
                 type_: Literal["Normal", "Warning"] = "Normal") -> list[Event]:
    before = inp.prior.phase if inp.prior is not None else None
    return [] if before is phase else [Event(type_, reason, message)]


def _refused(inp: DecisionInput, reason: str, message: str) -> Decision:
    status = _status(inp, MachinePhase.ERROR, message, [*cond.stalled(reason, message)],
                     in_schedule=False)
    return Decision((), status, None, tuple(_phase_event(inp, MachinePhase.ERROR, reason, message,
                                                          "Warning")))


def _cleanup(inp: DecisionInput) -> tuple[Action, ...]:
    """Delete the bootstrap and infrastructure objects once the Machine is gone."""
    return tuple(Delete(part) for part, obs in ((Part.BOOTSTRAP, inp.bootstrap),
                                                (Part.INFRASTRUCTURE, inp.infrastructure))
                 if isinstance(obs, Owned) and not obs.deleting)


# --- decide ---------------------------------------------------------------------------------


def decide(inp: DecisionInput) -> Decision:
    if inp.deleting_since is not None:
        return _deleting(inp)
    decision = _decide(inp)
    if inp.finalizer or decision.transient is not None or decision.needs_node or _refuses(inp):
        return decision
    return replace(decision, actions=(AddFinalizer(),) + decision.actions)


def _refuses(inp: DecisionInput) -> bool:
    """A refused object gets no finalizer: nothing is created for it, so nothing waits on its
    deletion, and outside the declared clusters' namespaces the controller may not patch it."""
    return isinstance(inp.spec, InvalidSpec) or inp.refusal is not None


def _decide(inp: DecisionInput) -> Decision:
    spec = inp.spec
    if isinstance(spec, InvalidSpec):
        return _refused(inp, Reason.INVALID_SPEC,
                        "the spec is invalid (an older CRD admitted it): " + "; ".join(spec.errors)
                        + ". Nothing is created or deleted until it is fixed")
    if inp.refusal is not None:
        return _refused(inp, Reason.NOT_ALLOWED, inp.refusal + ". Nothing is created or deleted "
                        "until it is fixed")
    for part, obs in ((Part.MACHINE, inp.machine), (Part.BOOTSTRAP, inp.bootstrap),
                      (Part.INFRASTRUCTURE, inp.infrastructure)):
        if isinstance(obs, Foreign):
            return _refused(inp, Reason.NAME_TAKEN,
                            f"a {part.value} object named {obs.name} exists and is not owned by "
                            "this ScheduledMachine; it is left alone. Delete or rename it, or "
                            "rename this ScheduledMachine")
    for part, obs in ((Part.MACHINE, inp.machine), (Part.BOOTSTRAP, inp.bootstrap),
                      (Part.INFRASTRUCTURE, inp.infrastructure)):
        if isinstance(obs, LookupFailed):
            return _transient(inp, f"reading the {part.value} object: {obs.message}")
    spot = spot_schedule(inp)
    resolution_error = None if spot.resolved else spot.reason
    if spec.kill_switch:
        decision = _kill(inp, spec, spot)
    elif not spec.enabled:
        decision = _out_of_schedule(inp, spec, spot, MachinePhase.DISABLED, Reason.DISABLED,
                                    "spec.enabled is false")
    elif isinstance(inp.schedule, LookupFailed):
        # Could not look (a kind still being resolved, a cache not synced, an API error): that
        # is not "never resolved", even on a first reconcile or right after a restart, so it
        # flips nothing — above all it never deletes what an earlier run created.
        return _transient(inp, f"reading the schedule provider: {inp.schedule.message}",
                          resolution_error)
    elif spot.active:
        decision = _in_schedule(inp, spec, spot)
    else:
        reason = Reason.SCHEDULE_INACTIVE if spot.active is False else Reason.SCHEDULE_NEVER_RESOLVED
        why = ("the schedule is inactive" if spot.active is False
               else "the schedule has never resolved")
        decision = _out_of_schedule(inp, spec, spot, MachinePhase.INACTIVE, reason, why)
    return replace(decision, resolution_error=resolution_error)


_PARTS: Final = ("machine", "bootstrap", "infrastructure")


def _deleting(inp: DecisionInput) -> Decision:
    """A ScheduledMachine being deleted leaves as a schedule closing would take it out (grace,
    cordon and taint, evictions honouring PodDisruptionBudgets, nodeDrainTimeout, then the
    Machine and its objects deleted), or at once under the kill switch; then the finalizer goes.
    Objects with the chosen names that it does not own are not its to delete, and are left."""
    if not inp.finalizer:
        return Decision((), inp.prior or MachineStatus(), None, ())  # not held: nothing to do
    why = "the ScheduledMachine is being deleted"
    spec = inp.spec
    if isinstance(spec, InvalidSpec) or inp.refusal is not None:
        detail = "; ".join(spec.errors) if isinstance(spec, InvalidSpec) else inp.refusal
        message = (f"{why} while its spec is refused ({detail}): fivespot cannot drain the node "
                   "for it, so the finalizer is removed; the garbage collector deletes the "
                   "Machine and the objects it owned, and CAPI drains the node as it deletes "
                   "the Machine")
        refused = _refused(inp, Reason.DELETED_WHILE_REFUSED, message)
        return replace(refused, events=(Event("Warning", Reason.DELETED_WHILE_REFUSED, message),),
                       release=True)
    ours = replace(inp, machine=_not_foreign(inp.machine), bootstrap=_not_foreign(inp.bootstrap),
                   infrastructure=_not_foreign(inp.infrastructure))
    bound = spec.grace + spec.drain_timeout + CLEANUP_SLACK
    deadline = inp.deleting_since + bound if inp.deleting_since is not None else inp.now
    left = [f"{part} {obs.name}" for part in _PARTS
            if isinstance(obs := getattr(ours, part), Owned)]
    if inp.now >= deadline:
        message = (f"{why}, and its cleanup did not finish within {bound} "
                   f"(gracefulShutdownTimeout + nodeDrainTimeout + {CLEANUP_SLACK}): "
                   f"{', '.join(left) or 'a lookup kept failing'} still there. The finalizer is "
                   "removed so that the deletion is not blocked forever; the garbage collector "
                   "deletes what the ScheduledMachine owned")
        status = _status(ours, inp.prior.phase if inp.prior is not None else MachinePhase.SHUTTING_DOWN,
                         message, [*cond.stalled(Reason.CLEANUP_TIMED_OUT, message)])
        return Decision((), status, None, (Event("Warning", Reason.CLEANUP_TIMED_OUT, message),),
                        release=True)
    for part in _PARTS:
        if isinstance(obs := getattr(ours, part), LookupFailed):
            return _transient(inp, f"reading the {part} object: {obs.message}")
    spot = spot_schedule(ours)
    if spec.kill_switch:
        decision = _kill(ours, spec, spot)
    else:
        decision = _remove(ours, spec, spot, MachinePhase.INACTIVE, Reason.DELETING, why)
    if decision.needs_node:
        return decision
    if not left:
        gone = Event("Normal", Reason.DELETING, f"{why}: the machine is out of the cluster; "
                     "removing the finalizer")
        return replace(decision, release=True, events=decision.events + (gone,))
    requeue = min(decision.requeue_at, deadline) if decision.requeue_at is not None else deadline
    return replace(decision, requeue_at=requeue)


def _not_foreign(obs: ObjectObservation) -> ObjectObservation:
    return None if isinstance(obs, Foreign) else obs


def _transient(inp: DecisionInput, why: str, resolution_error: str | None = None) -> Decision:
    status = inp.prior or MachineStatus()
    return Decision((), status, None, (), transient=why, resolution_error=resolution_error)


def _node_ref(machine: Owned | None) -> NodeRef | None:
    return NodeRef(name=machine.node) if machine is not None and machine.node else None


def _in_schedule(inp: DecisionInput, spec: MachineSpec, spot: SpotSchedule) -> Decision:
    prior = inp.prior or MachineStatus()
    machine = _owned(inp.machine)
    if prior.drain_started_at is not None and machine is not None:
        return _remove(inp, spec, spot, MachinePhase.INACTIVE, Reason.REOPENED_WHILE_DRAINING,
                       "the schedule reopened after the drain had begun; a drain is not reversed, "
                       "so the machine is removed and then created again")
    events: list[Event] = []
    if prior.shutdown_started_at is not None:
        events.append(Event("Normal", Reason.SHUTDOWN_CANCELLED,
                            "the schedule reopened during the graceful shutdown period; the "
                            "machine stays"))
    schedule_obs = _schedule_condition(spot)
    if machine is not None and machine.deleting:
        message = "waiting for the previous Machine to be deleted before creating it again"
        status = _status(inp, MachinePhase.PENDING, message, [
            *cond.working(Reason.MACHINE_DELETING, Reason.MACHINE_DELETING, message), schedule_obs,
            cond.false(MACHINE_CREATED, Reason.MACHINE_DELETING, message)],
            in_schedule=True, spot_schedule=spot, shutdown_started_at=None, drain_started_at=None,
            node_ref=None)
        return Decision((), status, inp.now + POLL, tuple(events))
    actions: list[Action] = []
    for part, obs in ((Part.BOOTSTRAP, inp.bootstrap), (Part.INFRASTRUCTURE, inp.infrastructure),
                      (Part.MACHINE, inp.machine)):
        if obs is None:
            actions.append(Create(part))
    created = cond.true(MACHINE_CREATED, Reason.CREATED,
                        "the bootstrap object, the infrastructure object and the Machine exist")
    if machine is None:
        created = cond.false(MACHINE_CREATED, Reason.NOT_CREATED, "creating the CAPI objects")
        events += _phase_event(inp, MachinePhase.PENDING, Reason.IN_SCHEDULE,
                               "the schedule is active: creating the bootstrap object, the "
                               "infrastructure object and the Machine")
    if machine is not None and machine.node:
        message = f"the Machine is in the cluster as node {machine.node}"
        phase = MachinePhase.ACTIVE
        ready = cond.settled(Reason.IN_SCHEDULE, message)
        events += _phase_event(inp, phase, Reason.IN_SCHEDULE, message)
    else:
        message = "the schedule is active; waiting for the Machine to get a node (status.nodeRef)"
        phase = MachinePhase.PENDING
        ready = cond.working(Reason.AWAITING_NODE,
                             Reason.CREATING if machine is None else Reason.AWAITING_NODE, message)
    drained = cond.false(NODE_DRAINED, Reason.NOT_DRAINING, "the machine is in schedule")
    status = _status(inp, phase, message, [*ready, schedule_obs, created, drained],
                     in_schedule=True, spot_schedule=spot, shutdown_started_at=None,
                     drain_started_at=None, node_ref=_node_ref(machine))
    return Decision(tuple(actions), status, None, tuple(events))


def _kill(inp: DecisionInput, spec: MachineSpec, spot: SpotSchedule) -> Decision:
    machine = _owned(inp.machine)
    message = ("spec.killSwitch is set: the Machine is deleted immediately, without the graceful "
               "shutdown period and without waiting for the node to drain")
    actions: tuple[Action, ...]
    if machine is not None:
        actions = () if machine.deleting else (Delete(Part.MACHINE),)
    else:
        actions = _cleanup(inp)
    remaining = machine is not None or bool(_cleanup(inp)) or any(
        isinstance(o, Owned) for o in (inp.bootstrap, inp.infrastructure))
    events = _phase_event(inp, MachinePhase.TERMINATED, Reason.KILL_SWITCH, message, "Warning")
    if remaining:
        ready = cond.working(Reason.KILL_SWITCH, Reason.MACHINE_DELETING if machine is not None
                             else Reason.OBJECTS_DELETING, message)
    else:
        message = ("spec.killSwitch is set: the machine is out of the cluster (removed at once, "
                   "without the graceful shutdown period or a drain); unset it to follow the "
                   "schedule again")
        ready = cond.settled(Reason.KILL_SWITCH, message)
    status = _status(inp, MachinePhase.TERMINATED, message, [
        *ready, _schedule_condition(spot),
        cond.false(MACHINE_CREATED, Reason.KILL_SWITCH, message),
        cond.false(NODE_DRAINED, Reason.KILL_SWITCH, "the drain was skipped (kill switch)")],
        in_schedule=False, spot_schedule=spot, node_ref=_node_ref(machine))
    return Decision(actions, status, inp.now + POLL if remaining else None,
                    tuple(events))


def _out_of_schedule(inp: DecisionInput, spec: MachineSpec, spot: SpotSchedule,
                     final: MachinePhase, reason: str, why: str) -> Decision:
    return _remove(inp, spec, spot, final, reason, why)


@dataclass(frozen=True)
class _Shutdown:
    """What every step of the way out shares: the reconcile's input, why the machine goes, the
    phase it ends in, and the Machine as observed."""

    inp: DecisionInput
    spec: MachineSpec
    spot: SpotSchedule
    final: MachinePhase
    reason: str
    why: str
    prior: MachineStatus
    machine: Owned | None

    def decision(self, message: str, drained: Observation, actions: tuple[Action, ...],
                 requeue: datetime | None, more: list[Event], **fields: object) -> Decision:
        """ShuttingDown: Reconciling=True, its reason the step under way — the Machine's deletion
        once it is asked for, the NodeDrained reason before."""
        machine = self.machine
        deleting = Delete(Part.MACHINE) in actions or (machine is not None and machine.deleting)
        step = Reason.MACHINE_DELETING if deleting else drained.reason
        status = _status(self.inp, MachinePhase.SHUTTING_DOWN, message, [
            *cond.working(self.reason, step, message), _schedule_condition(self.spot),
            cond.true(MACHINE_CREATED, Reason.CREATED, "the Machine exists"), drained],
            in_schedule=False, spot_schedule=self.spot, node_ref=_node_ref(machine), **fields)
        return Decision(actions, status, requeue, tuple(more))


@dataclass(frozen=True)
class _Drain:
    """The drain's clocks, latched in status, and the Events the step adds."""

    node: str
    deadline: datetime
    more: list[Event]
    fields: dict[str, object]


def _remove(inp: DecisionInput, spec: MachineSpec, spot: SpotSchedule, final: MachinePhase,
            reason: str, why: str) -> Decision:
    """The safe path out: grace, cordon and taint, evictions, nodeDrainTimeout, delete — one
    function per step."""
    out = _Shutdown(inp, spec, spot, final, reason, why, inp.prior or MachineStatus(),
                    _owned(inp.machine))
    machine = out.machine
    if machine is None:
        return _machine_gone(out)
    if machine.deleting:
        message = f"{why}: waiting for the Machine to be deleted"
        return out.decision(message, cond.kept(out.prior.conditions, cond.false(
            NODE_DRAINED, Reason.DRAINING, message)), (), inp.now + POLL, [],
            shutdown_started_at=out.prior.shutdown_started_at or inp.now,
            drain_started_at=out.prior.drain_started_at)
    started = out.prior.shutdown_started_at or inp.now
    more: list[Event] = []
    if out.prior.shutdown_started_at is None:
        more.append(Event("Normal", Reason.SHUTDOWN_STARTED,
                          f"{why}: the node is drained after the graceful shutdown period "
                          f"({spec.graceful_shutdown_timeout}), then the Machine is deleted"))
    grace_ends = started + spec.grace
    if inp.now < grace_ends and out.prior.drain_started_at is None:
        message = (f"{why}: graceful shutdown period until {grace_ends.isoformat()}, then the node "
                   "is cordoned and drained")
        return out.decision(message, cond.false(NODE_DRAINED, Reason.GRACE_PERIOD, message), (),
                            grace_ends, more, shutdown_started_at=started, drain_started_at=None)
    drain_started = out.prior.drain_started_at or inp.now
    fields: dict[str, object] = {"shutdown_started_at": started, "drain_started_at": drain_started}
    if machine.node is None:
        message = f"{why}: the Machine never got a node, so there is nothing to drain; deleting it"
        return out.decision(message, cond.true(NODE_DRAINED, Reason.NO_NODE, message),
                            (Delete(Part.MACHINE),), inp.now + POLL, more, **fields)
    if inp.node is None:
        return Decision((), MachineStatus(), None, (), needs_node=True)
    drain = _Drain(machine.node, drain_started + spec.drain_timeout, more, fields)
    if out.prior.drain_started_at is None:
        more.append(Event("Normal", Reason.DRAIN_STARTED,
                          f"cordoning node {drain.node} and evicting its pods; the Machine is "
                          f"deleted once it is drained, or at {drain.deadline.isoformat()} "
                          f"(nodeDrainTimeout {spec.node_drain_timeout})"))
    return _drain_step(out, drain, inp.node)


def _machine_gone(out: _Shutdown) -> Decision:
    """No Machine (any more): its bootstrap and infrastructure objects go, then it is settled."""
    inp, prior, reason, why = out.inp, out.prior, out.reason, out.why
    leftovers = any(isinstance(o, Owned) for o in (inp.bootstrap, inp.infrastructure))
    message = (f"{why}: the machine is not in the cluster" if not leftovers
               else f"{why}: the Machine is gone; deleting its bootstrap and infrastructure objects")
    phase_events = [] if leftovers else _phase_event(inp, out.final, reason, message)
    deleted = ([Event("Normal", Reason.MACHINE_DELETED, "the Machine is deleted")]
               if prior.machine_ref is not None and prior.phase is MachinePhase.SHUTTING_DOWN
               and not leftovers else [])
    drained = (cond.kept(prior.conditions, cond.false(NODE_DRAINED, Reason.NO_NODE, message))
               if prior.condition(NODE_DRAINED) is not None else
               cond.false(NODE_DRAINED, Reason.NO_NODE, "the machine has no node"))
    if leftovers:
        ready = cond.working(reason, Reason.OBJECTS_DELETING, message)
    elif reason == Reason.SCHEDULE_NEVER_RESOLVED:
        # as ScheduledCapacity: waiting for a provider that has never answered is not settled
        ready = cond.working(reason, reason, message)
    else:
        ready = cond.settled(reason, message)
    status = _status(inp, out.final, message, [
        *ready, _schedule_condition(out.spot),
        cond.false(MACHINE_CREATED, reason, message), drained],
        in_schedule=False, spot_schedule=out.spot, node_ref=None, shutdown_started_at=None,
        drain_started_at=None)
    return Decision(_cleanup(inp), status, inp.now + POLL if leftovers else None,
                    tuple(phase_events + deleted))


def _drain_step(out: _Shutdown, drain: _Drain, node: NodeSeen | NodeGone | LookupFailed
                | RefusedKubeconfig) -> Decision:
    """The drain, by what was observed of the node."""
    if isinstance(node, LookupFailed | RefusedKubeconfig):
        return _node_unreachable(out, drain, node)
    if isinstance(node, NodeSeen) and not (node.cordoned and node.tainted):
        return _cordon(out, drain, node)
    if isinstance(node, NodeGone) or not node.pods:
        message = f"{out.why}: node {drain.node} is drained; deleting the Machine"
        return out.decision(message, cond.true(NODE_DRAINED, Reason.DRAINED, message),
                            (Delete(Part.MACHINE),), out.inp.now + POLL,
                            drain.more + [Event("Normal", Reason.DRAINED, message)], **drain.fields)
    return _draining(out, drain, node)


def _node_unreachable(out: _Shutdown, drain: _Drain,
                      node: LookupFailed | RefusedKubeconfig) -> Decision:
    """The workload cluster could not be read, or its kubeconfig is refused: retried until
    nodeDrainTimeout, then the Machine is deleted anyway."""
    inp, why, spec = out.inp, out.why, out.spec
    refused = isinstance(node, RefusedKubeconfig)
    step = Reason.KUBECONFIG_REFUSED if refused else Reason.WORKLOAD_UNREACHABLE
    if inp.now >= drain.deadline:
        message = (f"{why}: node {drain.node} could not be drained within nodeDrainTimeout "
                   f"{spec.node_drain_timeout} ({node.message}); deleting the Machine anyway"
                   if refused else
                   f"{why}: the workload cluster could not be reached to drain node "
                   f"{drain.node} ({node.message}) within nodeDrainTimeout "
                   f"{spec.node_drain_timeout}; deleting the Machine anyway")
        return out.decision(message, cond.false(NODE_DRAINED, step, message),
                            (Delete(Part.MACHINE),), inp.now + POLL,
                            drain.more + [Event("Warning", Reason.DRAIN_TIMED_OUT, message)],
                            **drain.fields)
    if refused:
        message = (f"{why}: cannot drain node {drain.node}: {node.message}. Nothing is sent "
                   "to the workload cluster until the Secret is fixed; retrying until "
                   f"{drain.deadline.isoformat()}, then the Machine is deleted anyway")
    else:
        message = (f"{why}: cannot reach the workload cluster to drain node {drain.node} "
                   f"({node.message}); retrying until {drain.deadline.isoformat()}")
    drained = cond.false(NODE_DRAINED, step, message)
    return out.decision(message, drained, (), min(inp.now + POLL, drain.deadline),
                        (drain.more + _refusal_event(out.prior, drained)) if refused
                        else drain.more, **drain.fields)


def _cordon(out: _Shutdown, drain: _Drain, node: NodeSeen) -> Decision:
    """Cordon first, and look at the pods again only once nothing new can be scheduled there."""
    evictable = tuple(p for p in node.pods if not p.terminating)
    message = (f"{out.why}: cordoning node {drain.node} and evicting its pods; the Machine is "
               f"deleted at {drain.deadline.isoformat()} at the latest")
    return out.decision(message, cond.false(NODE_DRAINED, Reason.DRAINING, message),
                        (Cordon(node.name),) + ((Evict(evictable),) if evictable else ()),
                        out.inp.now + RECHECK, drain.more, **drain.fields)


def _draining(out: _Shutdown, drain: _Drain, node: NodeSeen) -> Decision:
    """Pods left on the cordoned node: evict them, until nodeDrainTimeout deletes it anyway."""
    inp, why = out.inp, out.why
    pods = ", ".join(f"{p.namespace}/{p.name}" for p in node.pods[:10])
    if len(node.pods) > 10:
        pods += f" and {len(node.pods) - 10} more"
    if inp.now >= drain.deadline:
        message = (f"{why}: node {drain.node} did not drain within nodeDrainTimeout "
                   f"{out.spec.node_drain_timeout} (still running: {pods}); deleting the Machine "
                   "anyway")
        return out.decision(message, cond.false(NODE_DRAINED, Reason.DRAIN_TIMED_OUT, message),
                            (Delete(Part.MACHINE),), inp.now + POLL,
                            drain.more + [Event("Warning", Reason.DRAIN_TIMED_OUT, message)],
                            **drain.fields)
    evictable = tuple(p for p in node.pods if not p.terminating)
    actions: tuple[Action, ...] = (Evict(evictable),) if evictable else ()
    message = (f"{why}: draining node {drain.node}: {len(node.pods)} pod(s) left ({pods}); "
               f"the Machine is deleted at {drain.deadline.isoformat()} at the latest")
    return out.decision(message, cond.false(NODE_DRAINED, Reason.DRAINING, message), actions,
                        min(inp.now + POLL, drain.deadline), drain.more, **drain.fields)


def _refusal_event(prior: MachineStatus, drained: Observation) -> list[Event]:
    """A Warning for a refused kubeconfig, once per refusal (not at every 5 s retry): when the
    prior NodeDrained did not already say the same."""
    before = prior.condition(NODE_DRAINED)
    if before is not None and (before.reason, before.message) == (drained.reason, drained.message):
        return []
    return [Event("Warning", Reason.KUBECONFIG_REFUSED, drained.message)]


def action_failed(inp: DecisionInput, decision: Decision, action: Action, message: str) -> Decision:
    """What to report when the API server refused an action for a reason a retry alone will not
    fix (the CAPI schema refuses an embedded spec, a permission is missing): the decided status
    with the failure said plainly, phase Error for a refused create, and a Warning event when
    the message is new. The shell keeps retrying with backoff, so a fix takes effect by itself."""
    if isinstance(action, Create):
        field = {Part.BOOTSTRAP: "spec.bootstrapSpec", Part.INFRASTRUCTURE: "spec.infrastructureSpec",
                 Part.MACHINE: "the Machine"}[action.part]
        text = (f"the API server refused to create the {action.part.value} object ({message}); "
                f"fix {field}" if action.part is not Part.MACHINE else
                f"the API server refused to create the Machine ({message})")
        reason, phase = Reason.CREATE_REJECTED, MachinePhase.ERROR
    else:
        text = f"{type(action).__name__} failed: {message}; retrying"
        reason, phase = Reason.ACTION_FAILED, decision.status.phase
    text = text[:1024]
    prior_ready = inp.prior.condition(READY) if inp.prior is not None else None
    others = tuple(Observation(c.type, c.status, c.reason, c.message, c.observed_generation)
                   for c in decision.status.conditions if c.type not in cond.KSTATUS_TYPES)
    # Ready and Stalled flip against what was reported, not against the decision never written.
    before = tuple(c for c in decision.status.conditions if c.type not in cond.KSTATUS_TYPES) + (
        tuple(c for c in inp.prior.conditions if c.type in cond.KSTATUS_TYPES) if inp.prior else ())
    merged = cond.merge(before, others + cond.stalled(reason, text), inp.now, inp.generation,
                        CONDITION_TYPES)
    status = decision.status.model_copy(update={"phase": phase, "message": text,
                                                "conditions": merged})
    new = prior_ready is None or prior_ready.message != text
    events = (Event("Warning", reason, text),) if new else ()
    return replace(decision, actions=(), status=status, events=events, requeue_at=None)
