"""The capacity controller's whole judgement, as one pure function: `decide(DecisionInput)`.

The I/O shell observes (spec, provider, target, ScheduledMachines, the compiled allowlist, the
prior status, the clock), calls `decide`, and then does exactly what the Decision says: at most
one merge patch of one field on the target (`target_patch`), then the status patch
(`status_patch`, None when nothing changed), then a requeue. Keeping every rule here means every
rule is covered by the decision table and the property tests, and a restart loses nothing: all
state is in the status that goes in and comes out.

Rules, in order of precedence (docs/design/contracts/scheduled-capacity.md is the authority):

1. Refusal (phase Error, never a write). A spec that failed the model, a capacity path or drained
   path that fails `api.fieldpath`, a target kind with no allowlist entry, a path the
   consumer does not allow, a drained path other than the consumer's, or an activeValue above the
   consumer's maximum. Checked before anything else, including the kill switch: a field the
   controller may not name cannot be written, not even with 0. The field is left as it was.
2. Transient API errors flip nothing. If the target could not be read, or the answer needs a
   provider or ScheduledMachine lookup that failed, the prior status is returned unchanged, no
   write is made, and `Decision.transient` tells the shell to retry with backoff. A lookup that
   does not matter for the answer (the schedule, when the kill switch is set) does not block it.
3. `killSwitch: true` -> phase Terminated: 0 is written at once and the drain is not awaited
   (HandbackComplete=False, HandbackSkipped). An operator pulling a kill switch wants the
   capacity gone now, not after a timeout.
4. `enabled: false` -> phase Disabled: the schedule is ignored and capacity is handed back the
   ordinary way (zero write, then the drain wait, reported in HandbackComplete and
   handbackDeadline). 0 is the safe direction; disabling is not an emergency, so the consumer's
   drain is still respected.
5. Host governance: `spec.nodeName` matching any ScheduledMachine's status.nodeRef.name ->
   HostGovernanceConflict=True and capacity is handed back exactly as when the schedule closes
   (phases HandingBack / HandbackTimedOut / Inactive). The active value is never written while
   conflicted, and while the machine list is unreadable the active value is not written either.
6. The schedule. Resolved -> follow status.active. Unresolved -> hold the last known answer and
   say why in SpotScheduleResolved=False; never resolved -> inactive.

Active: the active value is written (if not already in place) and the phase is Active. Ready is
True whenever the object is settled (Active, Inactive, Disabled or Terminated with nothing left to
hand back), with Reconciling or Stalled instead while it is not (`conditions.settle`). Handing back: 0 is written (if not already in place); the handback
starts at that moment and its deadline is start + handback.timeout. It completes (Inactive,
HandbackComplete=True) once the field reads 0 and the drain counter reads the number 0, or, with
no `handback`, once the field reads 0. Completion is latched: if someone later raises the field,
0 is written again without starting a new wait. Past the deadline it is HandbackTimedOut, still
held at 0, still waiting; a counter that later reaches 0 completes it. A schedule that reopens
at any point writes the active value again (Active).

A target that does not exist is reported (TargetResolved=False) and never created; the phase is
Pending unless the kill switch or `enabled: false` names it, and the handback is not tracked for
an object that is not there.

The shell's side of the contract: apply `write` first (`target_patch(write_path, write)`), and
only if that succeeded send `status_patch(raw prior status, decision.status)`, because the status
records the write as made (lastWriteTime, the handback start). If the write fails, send nothing
and retry; the next decision is recomputed from what is observed then. To make a failure that
persists visible (the target's schema refuses the value, RBAC is missing), the shell may patch
`write_failed(...)` instead, which changes nothing but CapacityWritten. Requeue at `requeue_at`
(a handback deadline); on `transient`, retry with backoff.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from enum import Enum
from typing import Final, Literal

from api.bundle import Consumer
from api.fieldgovernance import (
    Claim,
    GovernedBy,
    Governs,
    OtherWriter,
    autoscaled_message,
    governed_by_message,
    ignoring_message,
)
from api.fieldpath import capacity_path_error, drained_path_error
from api.kinds.scheduled_capacity import (
    INACTIVE_VALUE,
    Condition,
    ContestState,
    ConditionStatus,
    Phase,
    ScheduledCapacitySpec,
    ScheduledCapacityStatus,
    ScheduleState,
    api_group,
)
from api.provider_contract import LookupFailed, Resolved, ScheduleObservation, Unresolved
from controllers.capacity import conditions as cond
from controllers.capacity import contest
from controllers.capacity.conditions import Observation, Reason
from controllers.capacity.observations import (
    ABSENT,
    DecisionInput,
    InvalidSpec,
    MachineNode,
    OutOfPolicy,
    PolicyObservation,
    TargetFound,
    TargetNotFound,
    WithinPolicy,
    as_count,
)
from controllers.capacity.patches import status_patch, target_patch

__all__ = [
    "Decision",
    "DecisionInput",
    "Event",
    "Refusal",
    "decide",
    "refusal",
    "status_patch",
    "write_failed",
    "target_patch",
]


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event the shell should record on the ScheduledCapacity, or, with `machine`,
    on the ScheduledMachine of that name in its namespace (the other side of a host conflict,
    told from here: the machine identity reads no ScheduledCapacity)."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str
    machine: str | None = None


@dataclass(frozen=True)
class Decision:
    """What the shell must do. `write` is None or exactly 0 or spec.capacity.activeValue."""

    write: int | None
    write_path: str | None
    status: ScheduledCapacityStatus
    requeue_at: datetime | None
    events: tuple[Event, ...]
    transient: str | None = None
    """Set when a lookup failed: nothing was changed; retry with backoff."""
    ask_writer: bool = False
    """The write is a repair (someone rewrote the field) and the target's writer is unknown:
    the shell reads the field's manager (`TargetFound.writer`) and decides again."""


@dataclass(frozen=True)
class Refusal:
    """Why the spec cannot be acted on, phrased as what to fix."""

    reason: str
    message: str


class _Cause(Enum):
    """Why the field should hold what it holds; the first that applies wins."""

    KILL_SWITCH = Reason.KILL_SWITCH
    DISABLED = Reason.DISABLED
    CONFLICT = Reason.HOST_GOVERNANCE_CONFLICT
    OUT_OF_POLICY = Reason.OUT_OF_POLICY
    SCHEDULE_NEVER_RESOLVED = Reason.SCHEDULE_NEVER_RESOLVED
    SCHEDULE_INACTIVE = Reason.SCHEDULE_INACTIVE
    SCHEDULE_ACTIVE = Reason.CAPACITY_ACTIVE


@dataclass(frozen=True)
class _Capacity:
    """The capacity half of a decision: the write and the status fields it determines."""

    phase: Phase
    write: int | None
    written_value: int | None
    last_write_time: datetime | None
    handback_start_time: datetime | None
    handback_deadline: datetime | None
    observed_drained_value: int | None
    capacity: Observation
    handback: Observation
    summary: str
    requeue_at: datetime | None = None


def decide(inp: DecisionInput) -> Decision:
    """The write, status, requeue and events for one reconcile of one ScheduledCapacity."""
    now = _to_second(inp.now)
    spec = inp.spec
    if isinstance(spec, InvalidSpec):
        return _refuse(inp, _invalid_spec(spec), now)
    problem = refusal(spec, inp.allowlist)
    if problem is not None:
        return _refuse(inp, problem, now)
    standing = inp.field_standing
    if isinstance(standing, GovernedBy):
        return _yield_field(inp, spec, standing, now)
    if inp.autoscalers:
        return _yield_to_autoscaler(inp, spec, inp.autoscalers[0], now)
    if isinstance(inp.target, LookupFailed):
        return _hold(inp, Reason.TARGET_LOOKUP_FAILED, f"reading the target: {inp.target.message}", now)

    prior = inp.prior
    schedule_state, schedule_obs = _schedule(inp.schedule, spec, prior, now)
    conflict, conflict_obs = _conflict(spec, inp.machines, prior)
    cause = _cause(spec, inp.schedule, schedule_state, conflict, inp.policy)
    if cause is None:
        if isinstance(inp.schedule, LookupFailed):
            message = f"reading the schedule provider: {inp.schedule.message}"
            return _hold(inp, Reason.SCHEDULE_LOOKUP_FAILED, message, now)
        if isinstance(inp.policy, LookupFailed):
            message = f"reading the tenant limits in force: {inp.policy.message}"
            return _hold(inp, Reason.POLICY_LOOKUP_FAILED, message, now)
        assert isinstance(inp.machines, LookupFailed)  # the only other open question
        message = f"listing ScheduledMachines: {inp.machines.message}"
        return _hold(inp, Reason.MACHINE_LOOKUP_FAILED, message, now)

    if isinstance(inp.target, TargetNotFound):
        capacity = _target_missing(spec, cause, inp, prior)
        target_obs = cond.false(
            cond.TARGET_RESOLVED,
            Reason.TARGET_NOT_FOUND,
            f"{_target(spec, inp)} does not exist; create it or fix spec.targetRef "
            "(a ScheduledCapacity never creates its target)",
        )
    else:
        capacity = (
            _concede(spec, inp.target, prior, now)
            if cause is _Cause.SCHEDULE_ACTIVE
            else _hand_back(spec, cause, inp.target, prior, now)
        )
        target_obs = cond.true(cond.TARGET_RESOLVED, Reason.TARGET_FOUND, f"{_target(spec, inp)} exists")

    capacity, contested, ask_writer = _contest(spec, inp, capacity, prior, now)
    ready_reason = Reason.CAPACITY_ACTIVE if capacity.phase is Phase.ACTIVE else _ready_reason(cause, inp.target)
    progress = cond.settle(ready_reason, capacity.summary,
                           _stalled(cause, capacity, conflict_obs, inp.policy),
                           _reconciling(cause, capacity))
    observations = (*progress, schedule_obs, target_obs, capacity.capacity, capacity.handback, conflict_obs,
                    _field_observation(spec, inp, standing), *contested[1:])
    prior_conditions = prior.conditions if prior is not None else ()
    status = ScheduledCapacityStatus(
        phase=capacity.phase,
        conditions=cond.merge(prior_conditions, observations, now, inp.generation),
        written_value=capacity.written_value,
        last_write_time=capacity.last_write_time,
        observed_drained_value=capacity.observed_drained_value,
        governed_node=_governed_node(spec, conflict, prior),
        handback_start_time=capacity.handback_start_time,
        handback_deadline=capacity.handback_deadline,
        observed_generation=inp.generation,
        schedule=schedule_state,
        contest=contested[0],
    )
    return Decision(
        write=capacity.write,
        write_path=spec.capacity.path if capacity.write is not None else None,
        status=status,
        requeue_at=capacity.requeue_at,
        events=_events(prior, status, capacity.write, spec, inp),
        ask_writer=ask_writer,
    )


def _contest(
    spec: ScheduledCapacitySpec, inp: DecisionInput, capacity: _Capacity,
    prior: ScheduledCapacityStatus | None, now: datetime,
) -> tuple[_Capacity, tuple[ContestState | None] | tuple[ContestState | None, Observation], bool]:
    """Another writer of the field (`controllers.capacity.contest`): a write of the value the
    field is already held at is a repair, made at once or held back; FieldContested (present
    only while True) names the other writer. Returns the capacity half, the contest state (with
    its condition while contested), and whether the shell must read the writer first."""
    target = inp.target
    if not isinstance(target, TargetFound):
        return capacity, (None,), False
    repair = (capacity.write is not None and prior is not None
              and prior.written_value == capacity.write and prior.last_write_time is not None)
    judgement = contest.judge(prior.contest if prior is not None else None, repair, target.writer, now)
    if not judgement.write_now:
        capacity = replace(capacity, write=None, last_write_time=_prior_write_time(prior))
    requeue = min((t for t in (capacity.requeue_at, judgement.requeue_at) if t is not None), default=None)
    capacity = replace(capacity, requeue_at=requeue)
    state = judgement.state
    if state is None:
        return capacity, (None,), False
    waiting = judgement.requeue_at if not judgement.write_now else None
    message = contest.contested_message(state.manager, spec.capacity.path, _target(spec, inp), state, waiting)
    return (capacity, (state, cond.true(contest.FIELD_CONTESTED, contest.REWRITTEN, message)),
            repair and target.writer is None)


def write_failed(inp: DecisionInput, decision: Decision, error: str) -> ScheduledCapacityStatus:
    """The status to report when the shell could not apply `decision.write`.

    Only CapacityWritten (False, WriteFailed) and, with it, Ready=False and Stalled=True change;
    the phase and every other field stay as they were, because nothing the decision assumed has
    happened.
    """
    prior = inp.prior or ScheduledCapacityStatus()
    failed = cond.false(
        cond.CAPACITY_WRITTEN,
        Reason.WRITE_FAILED,
        _bounded(f"writing {decision.write} to {decision.write_path} failed: {error}", 1024),
    )
    others = tuple(
        Observation(c.type, c.status, c.reason, c.message, c.observed_generation)
        for c in prior.conditions
        if c.type not in (cond.CAPACITY_WRITTEN, cond.READY, cond.RECONCILING, cond.STALLED)
    )
    stalled = cond.true(cond.STALLED, Reason.WRITE_FAILED, failed.message)
    conditions = cond.merge(prior.conditions, (*cond.settle(Reason.WRITE_FAILED, failed.message, stalled, None), *others, failed),
                            _to_second(inp.now), inp.generation)
    return prior.model_copy(update={"conditions": conditions})


# --- refusal -----------------------------------------------------------------------------------


def refusal(spec: ScheduledCapacitySpec | InvalidSpec, entry: Consumer | None) -> Refusal | None:
    """Why this spec may not be acted on with this allowlist entry, or None when it may.

    Re-checks the field-path rule itself rather than trusting the model, because the spec may
    have come through an older CRD and the model is only as strict as this module's version.
    """
    if isinstance(spec, InvalidSpec):
        return _invalid_spec(spec)
    path_error = capacity_path_error(spec.capacity.path)
    if path_error is not None:
        return Refusal(Reason.CAPACITY_PATH_REJECTED, f"spec.capacity.path {path_error}")
    if spec.handback is not None:
        drained_error = drained_path_error(spec.handback.drained_path)
        if drained_error is not None:
            return Refusal(Reason.DRAINED_PATH_REJECTED, f"spec.handback.drainedPath {drained_error}")
    group, kind = spec.target_ref.group, spec.target_ref.kind
    if entry is None or (entry.group, entry.kind) != (group, kind):
        return Refusal(
            Reason.TARGET_NOT_ALLOWLISTED,
            f"no CapacityConsumer in the compiled bundle allows kind {kind} in group "
            f"{group or 'core'!r}; add a CapacityConsumer for it to the config repo, or point "
            "spec.targetRef at an allowed kind",
        )
    if spec.capacity.path not in entry.capacity_paths:
        allowed = ", ".join(sorted(entry.capacity_paths)) or "none"
        return Refusal(
            Reason.CAPACITY_PATH_NOT_ALLOWLISTED,
            f"spec.capacity.path {spec.capacity.path} is not a capacity path the CapacityConsumer "
            f"for {kind} allows (allowed: {allowed}); use one of those or extend the consumer",
        )
    if spec.capacity.active_value > entry.max_active_value:
        return Refusal(
            Reason.ACTIVE_VALUE_ABOVE_MAXIMUM,
            f"spec.capacity.activeValue {spec.capacity.active_value} is above the maximum "
            f"{entry.max_active_value} the CapacityConsumer for {kind} allows; lower it",
        )
    if spec.handback is not None and spec.handback.drained_path != entry.drained_path:
        declared = (
            f"declares {entry.drained_path}" if entry.drained_path else "declares no drainedPath"
        )
        return Refusal(
            Reason.DRAINED_PATH_NOT_ALLOWLISTED,
            f"spec.handback.drainedPath {spec.handback.drained_path} is not the drain counter of "
            f"{kind}: its CapacityConsumer {declared}; use that path, or remove spec.handback",
        )
    return None


def _invalid_spec(spec: InvalidSpec) -> Refusal:
    capacity = spec.raw.get("capacity")
    if isinstance(capacity, Mapping) and "path" in capacity:
        path_error = capacity_path_error(capacity["path"])
        if path_error is not None:
            return Refusal(Reason.CAPACITY_PATH_REJECTED, f"spec.capacity.path {path_error}")
    handback = spec.raw.get("handback")
    if isinstance(handback, Mapping) and "drainedPath" in handback:
        drained_error = drained_path_error(handback["drainedPath"])
        if drained_error is not None:
            return Refusal(Reason.DRAINED_PATH_REJECTED, f"spec.handback.drainedPath {drained_error}")
    detail = "; ".join(spec.errors) or "the spec does not match the ScheduledCapacity schema"
    return Refusal(Reason.INVALID_SPEC, _bounded(f"fix the spec: {detail}", 2048))


def _refuse(inp: DecisionInput, problem: Refusal, now: datetime, field_obs: Observation | None = None,
            not_evaluated: str = "not evaluated: the spec is refused") -> Decision:
    """Phase Error, nothing written; what the controller last knew is kept."""
    prior = inp.prior or ScheduledCapacityStatus()
    message = f"{problem.message}. Nothing is written to the target until this is fixed."
    observations = (
        *cond.settle(problem.reason, message, cond.true(cond.STALLED, problem.reason, message), None),
        cond.kept(prior.conditions, cond.unknown(cond.SPOT_SCHEDULE_RESOLVED, Reason.NOT_EVALUATED, not_evaluated)),
        cond.kept(prior.conditions, cond.unknown(cond.TARGET_RESOLVED, Reason.NOT_EVALUATED, not_evaluated)),
        cond.false(cond.CAPACITY_WRITTEN, problem.reason, message),
        cond.kept(prior.conditions, cond.unknown(cond.HANDBACK_COMPLETE, Reason.NOT_EVALUATED, not_evaluated)),
        cond.kept(prior.conditions, cond.unknown(cond.HOST_GOVERNANCE_CONFLICT, Reason.NOT_EVALUATED, not_evaluated)),
        field_obs or cond.kept(prior.conditions, cond.unknown(cond.FIELD_GOVERNANCE_CONFLICT, Reason.NOT_EVALUATED,
                                                             not_evaluated)),
    )
    status = prior.model_copy(
        update={
            "phase": Phase.ERROR,
            "conditions": cond.merge(prior.conditions, observations, now, inp.generation),
            "observed_generation": inp.generation,
        }
    )
    return Decision(
        write=None,
        write_path=None,
        status=status,
        requeue_at=None,
        events=_events(inp.prior, status, None, None, inp),
    )


def _claim(spec: ScheduledCapacitySpec, inp: DecisionInput) -> Claim:
    ref = spec.target_ref
    return Claim(inp.namespace, inp.name, ref.api_version, ref.kind, ref.name, spec.capacity.path)


def _yield_field(
    inp: DecisionInput, spec: ScheduledCapacitySpec, standing: GovernedBy, now: datetime
) -> Decision:
    """An older ScheduledCapacity governs the field: Error, and nothing at all is written (not
    even 0: the field is the governor's), whatever this object's schedule, kill switch or
    enabled say. The next reconcile after the governor is gone takes the field over."""
    message = governed_by_message(_claim(spec, inp), standing.governor)
    field_obs = cond.true(cond.FIELD_GOVERNANCE_CONFLICT, Reason.GOVERNED_BY_OLDER, message)
    problem = Refusal(Reason.GOVERNED_BY_OLDER, message.rstrip("."))
    return _refuse(inp, problem, now, field_obs,
                   not_evaluated="not evaluated: another ScheduledCapacity governs the field")


def _yield_to_autoscaler(
    inp: DecisionInput, spec: ScheduledCapacitySpec, writer: OtherWriter, now: datetime
) -> Decision:
    """An HPA or a KEDA ScaledObject scales the field's object: a governor fivespot does not
    run, so this object writes nothing (as when an older ScheduledCapacity governs) and says
    what to gate instead, in the words of the webhook and `fivespot check`."""
    message = autoscaled_message(_claim(spec, inp), writer)
    field_obs = cond.true(cond.FIELD_GOVERNANCE_CONFLICT, Reason.SCALED_BY_AUTOSCALER, message)
    problem = Refusal(Reason.SCALED_BY_AUTOSCALER, message)
    return _refuse(inp, problem, now, field_obs,
                   not_evaluated="not evaluated: an autoscaler governs the field")


def _field_observation(spec: ScheduledCapacitySpec, inp: DecisionInput, standing: Governs | GovernedBy) -> Observation:
    if isinstance(standing, Governs) and standing.ignored:
        return cond.true(cond.FIELD_GOVERNANCE_CONFLICT, Reason.YOUNGER_IGNORED,
                         ignoring_message(_claim(spec, inp), standing.ignored))
    claim = _claim(spec, inp)
    return cond.false(cond.FIELD_GOVERNANCE_CONFLICT, Reason.SOLE_GOVERNOR,
                      f"no other ScheduledCapacity names {claim.path} of {claim.describe_target()}")


def _hold(inp: DecisionInput, reason: str, message: str, now: datetime) -> Decision:
    """A lookup failed: change nothing, and let the shell retry."""
    if inp.prior is not None:
        status = inp.prior
    else:
        retrying = f"{message}; retrying"
        waiting = cond.settle(reason, retrying, None, cond.true(cond.RECONCILING, reason, retrying))
        status = ScheduledCapacityStatus(conditions=cond.merge((), waiting, now, inp.generation))
    return Decision(
        write=None, write_path=None, status=status, requeue_at=None, events=(), transient=message
    )


# --- inputs to the cause -----------------------------------------------------------------------


def _schedule(
    observed: ScheduleObservation,
    spec: ScheduledCapacitySpec,
    prior: ScheduledCapacityStatus | None,
    now: datetime,
) -> tuple[ScheduleState | None, Observation]:
    held = prior.schedule if prior is not None else None
    ref = f"{spec.schedule.kind} {spec.schedule.name}"
    if isinstance(observed, Resolved):
        if held is not None and held.active == observed.active and held.last_transition_time:
            since = held.last_transition_time
        else:
            since = now
        state = ScheduleState(active=observed.active, resolved=True, last_transition_time=since)
        return state, cond.true(
            cond.SPOT_SCHEDULE_RESOLVED, Reason.RESOLVED, f"{ref} reports active={_bool(observed.active)}"
        )
    if isinstance(observed, Unresolved):
        last = held.active if held is not None else None
        state = ScheduleState(
            active=last,
            resolved=False,
            last_transition_time=held.last_transition_time if held is not None else None,
        )
        consequence = (
            "it has never resolved, so the schedule is treated as inactive"
            if last is None
            else f"holding the last known state, active={_bool(last)}"
        )
        return state, cond.false(
            cond.SPOT_SCHEDULE_RESOLVED, observed.reason.value, f"{ref}: {observed.message}; {consequence}"
        )
    fallback = cond.unknown(
        cond.SPOT_SCHEDULE_RESOLVED, Reason.SCHEDULE_LOOKUP_FAILED, f"{ref}: {observed.message}"
    )
    return held, cond.kept(prior.conditions if prior is not None else (), fallback)


def _conflict(
    spec: ScheduledCapacitySpec,
    machines: tuple[MachineNode, ...] | LookupFailed,
    prior: ScheduledCapacityStatus | None,
) -> tuple[bool | None, Observation]:
    """Whether a ScheduledMachine governs spec.nodeName: True, False, or None (cannot tell)."""
    node = spec.node_name
    if node is None:
        return False, cond.false(
            cond.HOST_GOVERNANCE_CONFLICT,
            Reason.NODE_NAME_UNSET,
            "spec.nodeName is not set, so a conflict with a ScheduledMachine cannot be detected",
        )
    if isinstance(machines, LookupFailed):
        fallback = cond.unknown(
            cond.HOST_GOVERNANCE_CONFLICT,
            Reason.MACHINE_LOOKUP_FAILED,
            f"listing ScheduledMachines failed: {machines.message}",
        )
        return None, cond.kept(prior.conditions if prior is not None else (), fallback)
    governing = sorted({m.machine for m in machines if m.node == node})
    if governing:
        names = ", ".join(governing)
        return True, cond.true(
            cond.HOST_GOVERNANCE_CONFLICT,
            Reason.NODE_GOVERNED_BY_MACHINE,
            f"node {node} is the nodeRef of ScheduledMachine {names}; a host is governed by one "
            "or the other, so capacity is held at 0. Fix spec.nodeName or retire the machine; "
            "recovery is automatic",
        )
    return False, cond.false(
        cond.HOST_GOVERNANCE_CONFLICT,
        Reason.NO_CONFLICT,
        f"no ScheduledMachine in the namespace has node {node} as its nodeRef",
    )


def _cause(
    spec: ScheduledCapacitySpec,
    observed: ScheduleObservation,
    schedule: ScheduleState | None,
    conflict: bool | None,
    policy: PolicyObservation = WithinPolicy(),
) -> _Cause | None:
    """The first rule that applies, or None when a failed lookup leaves the answer open. An
    object the policies in force now deny is handed back like a closing schedule: the value
    goes to 0 (zero first, then the drain wait, as every handback), never above what the
    tenant's current limits allow, until the object complies (lowering its value is always
    admitted) or the policy is relaxed."""
    if spec.kill_switch:
        return _Cause.KILL_SWITCH
    if not spec.enabled:
        return _Cause.DISABLED
    if conflict is True:
        return _Cause.CONFLICT
    active = schedule.active if schedule is not None else None
    if active is None:
        return None if isinstance(observed, LookupFailed) else _Cause.SCHEDULE_NEVER_RESOLVED
    if not active:
        return _Cause.SCHEDULE_INACTIVE
    if isinstance(policy, OutOfPolicy):
        return _Cause.OUT_OF_POLICY
    if conflict is None or isinstance(policy, LookupFailed):
        return None
    return _Cause.SCHEDULE_ACTIVE


# --- the capacity half -------------------------------------------------------------------------


def _concede(
    spec: ScheduledCapacitySpec, target: TargetFound, prior: ScheduledCapacityStatus | None, now: datetime
) -> _Capacity:
    value = spec.capacity.active_value
    write = None if as_count(target.value) == value else value
    held = f"{spec.capacity.path} is held at {value}"
    return _Capacity(
        phase=Phase.ACTIVE,
        write=write,
        written_value=value,
        last_write_time=now if write is not None else _prior_write_time(prior),
        handback_start_time=None,
        handback_deadline=None,
        observed_drained_value=None,
        capacity=cond.true(cond.CAPACITY_WRITTEN, Reason.VALUE_HELD, held),
        handback=cond.false(
            cond.HANDBACK_COMPLETE,
            Reason.NOT_HANDING_BACK,
            "the schedule is open and capacity is conceded; nothing is being handed back",
        ),
        summary=f"the schedule is active; {held}",
    )


def _hand_back(
    spec: ScheduledCapacitySpec,
    cause: _Cause,
    target: TargetFound,
    prior: ScheduledCapacityStatus | None,
    now: datetime,
) -> _Capacity:
    path = spec.capacity.path
    write = None if as_count(target.value) == INACTIVE_VALUE else INACTIVE_VALUE
    continued = (
        prior
        if prior is not None
        and prior.written_value == INACTIVE_VALUE
        and prior.handback_start_time is not None
        else None
    )
    start = continued.handback_start_time if continued is not None else None
    start = start or now
    if cause is _Cause.KILL_SWITCH:
        progress = _Progress(
            phase=Phase.TERMINATED,
            handback=cond.false(
                cond.HANDBACK_COMPLETE,
                Reason.HANDBACK_SKIPPED,
                "killSwitch is set: 0 is written at once and the consumer's drain is not awaited",
            ),
            summary=f"{path} is held at 0",
        )
    elif continued is None and _nothing_given(target, prior):
        progress = _nothing_to_hand_back(spec, target)
        if cause is _Cause.DISABLED:
            progress = replace(progress, phase=Phase.DISABLED)
    else:
        progress = _handback_progress(spec, target, continued, start, now)
        if cause is _Cause.DISABLED:
            progress = replace(progress, phase=Phase.DISABLED)
    return _Capacity(
        phase=progress.phase,
        write=write,
        written_value=INACTIVE_VALUE,
        last_write_time=now if write is not None else _prior_write_time(prior),
        handback_start_time=start,
        handback_deadline=progress.deadline,
        observed_drained_value=progress.drained_value,
        capacity=cond.true(cond.CAPACITY_WRITTEN, Reason.VALUE_HELD, f"{path} is held at 0"),
        handback=progress.handback,
        summary=f"{_CAUSE_SENTENCE[cause]}; {progress.summary}",
        requeue_at=progress.requeue_at,
    )


def _nothing_given(target: TargetFound, prior: ScheduledCapacityStatus | None) -> bool:
    """Nothing given, nothing to hand back: the field is absent or 0 as this object starts
    governing it, and the object has not held it at the active value since (its last held value
    is none or 0; the handback that follows an Active phase always starts from activeValue).
    The drain wait is for capacity that was above 0."""
    fresh = target.value is ABSENT or as_count(target.value) == INACTIVE_VALUE
    return fresh and (prior is None or prior.written_value in (None, INACTIVE_VALUE))


def _nothing_to_hand_back(spec: ScheduledCapacitySpec, target: TargetFound) -> _Progress:
    """Inactive as soon as 0 is in place (the status is written only after the zero write has
    landed), with no deadline; latched like any completed handback."""
    path = spec.capacity.path
    found = "absent" if target.value is ABSENT else "0"
    return _Progress(
        phase=Phase.INACTIVE,
        handback=cond.true(
            cond.HANDBACK_COMPLETE,
            Reason.NOTHING_CONCEDED,
            f"{path} was {found} when this object began governing it and the active value was "
            "never written, so there is nothing to hand back and no drain to wait for",
        ),
        summary=f"the handback is complete; {path} is held at 0",
        drained_value=as_count(target.drained) if spec.handback is not None else None,
    )


@dataclass(frozen=True)
class _Progress:
    """Where a handback stands: the phase it implies and what HandbackComplete says."""

    phase: Phase
    handback: Observation
    summary: str
    deadline: datetime | None = None
    drained_value: int | None = None
    requeue_at: datetime | None = None


def _handback_progress(
    spec: ScheduledCapacitySpec,
    target: TargetFound,
    continued: ScheduledCapacityStatus | None,
    start: datetime,
    now: datetime,
) -> _Progress:
    """HandingBack, HandbackTimedOut or Inactive, from the observations and the prior status."""
    path = spec.capacity.path
    handback = spec.handback
    drained = as_count(target.drained) if handback is not None else None
    complete = continued.condition(cond.HANDBACK_COMPLETE) if continued is not None else None
    if continued is not None and complete is not None and complete.status is ConditionStatus.TRUE:
        return _Progress(
            phase=Phase.INACTIVE,
            handback=_observation(complete),
            summary=f"the handback is complete; {path} is held at 0",
            drained_value=continued.observed_drained_value,
        )
    landed = as_count(target.value) == INACTIVE_VALUE
    if landed and handback is None:
        return _Progress(
            phase=Phase.INACTIVE,
            handback=cond.true(
                cond.HANDBACK_COMPLETE,
                Reason.ZERO_WRITTEN,
                f"{path} reads 0 and spec.handback is not set, so the handback is complete",
            ),
            summary=f"the handback is complete; {path} is held at 0",
        )
    if landed and handback is not None and drained == 0:
        return _Progress(
            phase=Phase.INACTIVE,
            handback=cond.true(
                cond.HANDBACK_COMPLETE,
                Reason.DRAINED,
                f"{handback.drained_path} reads 0; the handback is complete",
            ),
            summary=f"the handback is complete; {path} is held at 0",
            drained_value=drained,
        )
    deadline = start + handback.timeout_delta if handback is not None else None
    if handback is not None and deadline is not None and now >= deadline:
        return _Progress(
            phase=Phase.HANDBACK_TIMED_OUT,
            handback=cond.false(
                cond.HANDBACK_COMPLETE,
                Reason.HANDBACK_TIMED_OUT,
                f"{handback.drained_path} is {_describe_counter(target.drained)} after the "
                f"{handback.timeout} timeout (deadline {_stamp(deadline)}); {path} is held at 0 "
                "and nothing is forced. Ask the consumer to finish draining, or raise "
                "spec.handback.timeout",
            ),
            summary=f"the handback timed out at {_stamp(deadline)}; {path} is held at 0",
            deadline=deadline,
            drained_value=drained,
        )
    until = f" until {_stamp(deadline)}" if deadline is not None else ""
    if not landed:
        waiting = cond.false(
            cond.HANDBACK_COMPLETE,
            Reason.AWAITING_ZERO_WRITE,
            f"0 is written to {path} and has not been observed yet; waiting{until}",
        )
    elif handback is not None and drained is None:
        waiting = cond.false(
            cond.HANDBACK_COMPLETE,
            Reason.DRAIN_COUNTER_UNREADABLE,
            f"{handback.drained_path} is {_describe_counter(target.drained)}; an unread or "
            f"non-numeric counter is not drained; waiting{until}",
        )
    else:
        assert handback is not None  # landed without handback returned above
        waiting = cond.false(
            cond.HANDBACK_COMPLETE,
            Reason.AWAITING_DRAIN,
            f"{handback.drained_path} reads {drained}; waiting for 0{until}",
        )
    return _Progress(
        phase=Phase.HANDING_BACK,
        handback=waiting,
        summary=f"handing back: {waiting.message}",
        deadline=deadline,
        drained_value=drained,
        requeue_at=deadline,
    )


def _target_missing(
    spec: ScheduledCapacitySpec, cause: _Cause, inp: DecisionInput, prior: ScheduledCapacityStatus | None
) -> _Capacity:
    phase = {_Cause.KILL_SWITCH: Phase.TERMINATED, _Cause.DISABLED: Phase.DISABLED}.get(
        cause, Phase.PENDING
    )
    missing = f"{_target(spec, inp)} does not exist, so nothing is written"
    return _Capacity(
        phase=phase,
        write=None,
        written_value=prior.written_value if prior is not None else None,
        last_write_time=_prior_write_time(prior),
        handback_start_time=None,
        handback_deadline=None,
        observed_drained_value=None,
        capacity=cond.false(cond.CAPACITY_WRITTEN, Reason.TARGET_NOT_FOUND, missing),
        handback=cond.unknown(cond.HANDBACK_COMPLETE, Reason.TARGET_NOT_FOUND, missing),
        summary=f"{_CAUSE_SENTENCE[cause]}; {missing}",
    )


# --- small helpers -----------------------------------------------------------------------------

_CAUSE_SENTENCE = {
    _Cause.KILL_SWITCH: "spec.killSwitch is set",
    _Cause.DISABLED: "spec.enabled is false",
    _Cause.CONFLICT: "a ScheduledMachine governs spec.nodeName",
    _Cause.OUT_OF_POLICY: "the admission policies in force now deny this object",
    _Cause.SCHEDULE_NEVER_RESOLVED: "the schedule has never resolved and is treated as inactive",
    _Cause.SCHEDULE_INACTIVE: "the schedule is inactive",
    _Cause.SCHEDULE_ACTIVE: "the schedule is active",
}


_HANDBACK_UNDER_WAY: Final = frozenset(
    {Reason.AWAITING_ZERO_WRITE, Reason.AWAITING_DRAIN, Reason.DRAIN_COUNTER_UNREADABLE})


def _stalled(cause: _Cause, capacity: _Capacity, conflict: Observation,
             policy: PolicyObservation = WithinPolicy()) -> Observation | None:
    """Stalled=True: the controller cannot reach the desired state without a person."""
    if capacity.phase is Phase.HANDBACK_TIMED_OUT or capacity.handback.reason == Reason.HANDBACK_TIMED_OUT:
        return cond.true(cond.STALLED, Reason.HANDBACK_TIMED_OUT, capacity.summary)
    if cause is _Cause.CONFLICT:
        return cond.true(cond.STALLED, Reason.HOST_GOVERNANCE_CONFLICT, conflict.message)
    if cause is _Cause.OUT_OF_POLICY and isinstance(policy, OutOfPolicy):
        return cond.true(cond.STALLED, Reason.OUT_OF_POLICY, _bounded(
            "the admission policies in force now deny this object, so its capacity is handed "
            "back to 0 and held there: " + "; ".join(policy.messages) + ". Change the object to "
            "comply (lowering spec.capacity.activeValue, disabling it or its kill switch is "
            "always admitted) or ask the platform team", 32768))
    return None


def _reconciling(cause: _Cause, capacity: _Capacity) -> Observation | None:
    """Reconciling=True: the controller is still on its way (a handback under way, a target that
    does not exist yet, a schedule that has never resolved)."""
    if capacity.handback.status is ConditionStatus.FALSE and capacity.handback.reason in _HANDBACK_UNDER_WAY:
        return cond.true(cond.RECONCILING, capacity.handback.reason, capacity.summary)
    if capacity.phase is Phase.PENDING:
        return cond.true(cond.RECONCILING, Reason.TARGET_NOT_FOUND, capacity.summary)
    if cause is _Cause.SCHEDULE_NEVER_RESOLVED:
        return cond.true(cond.RECONCILING, Reason.SCHEDULE_NEVER_RESOLVED, capacity.summary)
    return None


def _ready_reason(cause: _Cause, target: object) -> str:
    if cause in (_Cause.KILL_SWITCH, _Cause.DISABLED) or not isinstance(target, TargetNotFound):
        return str(cause.value)
    return Reason.TARGET_NOT_FOUND


def _governed_node(
    spec: ScheduledCapacitySpec, conflict: bool | None, prior: ScheduledCapacityStatus | None
) -> str | None:
    if conflict is None:
        return prior.governed_node if prior is not None else None
    return spec.node_name if not conflict else None


_SCHEDULE_ROUND: Final = frozenset({Phase.ACTIVE, Phase.HANDING_BACK, Phase.INACTIVE})
"""The phases a schedule moves an object through; a change among them is no Event."""


def _events(
    prior: ScheduledCapacityStatus | None,
    status: ScheduledCapacityStatus,
    write: int | None,
    spec: ScheduledCapacitySpec | None,
    inp: DecisionInput,
) -> tuple[Event, ...]:
    # Events for what a person may want to know, not one per flip: a market open is every
    # tenant's schedule opening in the same second, and every Event is a POST. The schedule's own
    # round (Active -> HandingBack -> Inactive -> Active) is in the status (phase, Ready and its
    # lastTransitionTime, lastWriteTime) and the metrics; a first phase, a phase outside that
    # round (Error, HandbackTimedOut, Disabled, Terminated, Pending) or a way back from one, a
    # write that repairs a drifted field, and every trouble condition are Events.
    events: list[Event] = []
    wrote = (f"wrote {write} to {spec.capacity.path} on {_target(spec, inp)}"
             if write is not None and spec is not None else None)
    changed = prior is None or prior.phase is not status.phase
    routine = prior is not None and {prior.phase, status.phase} <= _SCHEDULE_ROUND
    if changed and not routine:
        ready = status.condition(cond.READY)
        loud = status.phase in (Phase.ERROR, Phase.HANDBACK_TIMED_OUT)
        message = ready.message if ready is not None else status.phase.value
        events.append(
            Event("Warning" if loud else "Normal", status.phase.value,
                  f"{message}; {wrote}" if wrote is not None else message)
        )
    elif wrote is not None and not changed:
        events.append(Event("Normal", "CapacityWritten", wrote))
    before = {c.type: c for c in prior.conditions} if prior is not None else {}
    for condition in status.conditions:
        earlier = before.get(condition.type)
        moved = earlier is None or (earlier.status, earlier.reason) != (
            condition.status,
            condition.reason,
        )
        if moved and _is_trouble(condition):
            events.append(Event("Warning", condition.reason, condition.message))
            if condition.type == cond.HOST_GOVERNANCE_CONFLICT and spec is not None:
                events += _machine_side(spec, inp)
    return tuple(events)


def _machine_side(spec: ScheduledCapacitySpec, inp: DecisionInput) -> list[Event]:
    """The conflict as the ScheduledMachines sharing the node see it (`kubectl describe sm`)."""
    if isinstance(inp.machines, LookupFailed):
        return []
    message = (f"node {spec.node_name} is also named by ScheduledCapacity {inp.namespace}/{inp.name} "
               "(spec.nodeName); a host is governed by a ScheduledMachine or a ScheduledCapacity, "
               "never both: the capacity side holds its value at 0 and this machine follows its "
               "schedule. Point that spec.nodeName elsewhere or unset it")
    return [Event("Warning", Reason.NODE_GOVERNED_BY_MACHINE, message, machine=m.machine)
            for m in sorted(inp.machines, key=lambda m: m.machine) if m.node == spec.node_name]


def _is_trouble(condition: Condition) -> bool:
    """A condition worth a Warning event when it turns up (Ready and Error are covered by phase)."""
    if condition.type in (cond.HOST_GOVERNANCE_CONFLICT, contest.FIELD_CONTESTED):
        return condition.status is ConditionStatus.TRUE
    if condition.type == cond.STALLED and condition.reason == Reason.OUT_OF_POLICY:
        return condition.status is ConditionStatus.TRUE
    return (
        condition.type in (cond.SPOT_SCHEDULE_RESOLVED, cond.TARGET_RESOLVED)
        and condition.status is ConditionStatus.FALSE
    )


def _observation(condition: Condition) -> Observation:
    return Observation(condition.type, condition.status, condition.reason, condition.message)


def _prior_write_time(prior: ScheduledCapacityStatus | None) -> datetime | None:
    return prior.last_write_time if prior is not None else None


def _target(spec: ScheduledCapacitySpec, inp: DecisionInput) -> str:
    group = api_group(spec.target_ref.api_version)
    kind = f"{spec.target_ref.kind}.{group}" if group else spec.target_ref.kind
    return f"{kind} {inp.namespace}/{spec.target_ref.name}"


def _describe_counter(raw: object) -> str:
    if raw is ABSENT:
        return "missing"
    count = as_count(raw)
    if count is not None:
        return f"still {count}"
    return _bounded(f"{raw!r} (not a number)", 80)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _stamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _to_second(now: datetime) -> datetime:
    """Status timestamps have second precision, like metav1.Time; naive clocks are refused."""
    if now.tzinfo is None:
        raise ValueError("decide() needs a timezone-aware `now`")
    return now.astimezone(timezone.utc).replace(microsecond=0)
