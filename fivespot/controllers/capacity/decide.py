"""The capacity controller's whole judgement, as one pure function: `decide(DecisionInput)`.

The I/O shell observes (spec, provider, target, ScheduledMachines, the compiled allowlist, the
prior status, the clock), calls `decide`, and then does exactly what the Decision says: at most
one merge patch of one field on the target (`target_patch`), then the status patch
(`status_patch`, None when nothing changed), then a requeue. Keeping every rule here means every
rule is covered by the decision table and the property tests, and a restart loses nothing: all
state is in the status that goes in and comes out.

Its parts live beside it: refusals (`refusal`), the capacity half — conceding and handing back —
(`handback`), the Events (`events`), and what they share (`decision`). This module keeps the order
of the rules, the schedule, the host conflict, the contest and the kstatus conditions.

Rules, in order of precedence (docs/design/contracts/scheduled-capacity.md is the authority):

1. Refusal (phase Error, never a write). A spec that failed the model, a capacity path or drained
   path that fails `fivespot.api.fieldpath`, a target kind with no allowlist entry, a path the
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

from dataclasses import replace
from datetime import datetime
from typing import Final

from fivespot.api.fieldgovernance import GovernedBy, Governs, ignoring_message
from fivespot.api.kinds.scheduled_capacity import (
    ConditionStatus,
    ContestState,
    Phase,
    ScheduledCapacitySpec,
    ScheduledCapacityStatus,
    ScheduleState,
)
from fivespot.api.provider_contract import LookupFailed, Resolved, ScheduleObservation, Unresolved
from fivespot.controllers.capacity import conditions as cond
from fivespot.controllers.capacity import contest
from fivespot.controllers.capacity.conditions import Observation, Reason
from fivespot.controllers.capacity.decision import (
    Capacity,
    Cause,
    Decision,
    Event,
    Refusal,
    bounded,
    prior_write_time,
    target_name,
    to_second,
)
from fivespot.controllers.capacity.events import decision_events
from fivespot.controllers.capacity.handback import concede, hand_back, target_missing
from fivespot.controllers.capacity.observations import (
    DecisionInput,
    InvalidSpec,
    MachineNode,
    OutOfPolicy,
    PolicyObservation,
    TargetFound,
    TargetNotFound,
    WithinPolicy,
)
from fivespot.controllers.capacity.patches import status_patch, target_patch
from fivespot.controllers.capacity.refusal import (
    field_claim,
    invalid_spec,
    refusal,
    refuse,
    yield_field,
    yield_to_autoscaler,
)

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


def decide(inp: DecisionInput) -> Decision:
    """The write, status, requeue and events for one reconcile of one ScheduledCapacity."""
    now = to_second(inp.now)
    spec = inp.spec
    if isinstance(spec, InvalidSpec):
        return refuse(inp, invalid_spec(spec), now)
    problem = refusal(spec, inp.allowlist)
    if problem is not None:
        return refuse(inp, problem, now)
    standing = inp.field_standing
    if isinstance(standing, GovernedBy):
        return yield_field(inp, spec, standing, now)
    if inp.autoscalers:
        return yield_to_autoscaler(inp, spec, inp.autoscalers[0], now)
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
        capacity = target_missing(spec, cause, inp, prior)
        target_obs = cond.false(
            cond.TARGET_RESOLVED,
            Reason.TARGET_NOT_FOUND,
            f"{target_name(spec, inp)} does not exist; create it or fix spec.targetRef "
            "(a ScheduledCapacity never creates its target)",
        )
    else:
        capacity = (
            concede(spec, inp.target, prior, now)
            if cause is Cause.SCHEDULE_ACTIVE
            else hand_back(spec, cause, inp.target, prior, now)
        )
        target_obs = cond.true(cond.TARGET_RESOLVED, Reason.TARGET_FOUND, f"{target_name(spec, inp)} exists")

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
        events=decision_events(prior, status, capacity.write, spec, inp),
        ask_writer=ask_writer,
    )


def _contest(
    spec: ScheduledCapacitySpec, inp: DecisionInput, capacity: Capacity,
    prior: ScheduledCapacityStatus | None, now: datetime,
) -> tuple[Capacity, tuple[ContestState | None] | tuple[ContestState | None, Observation], bool]:
    """Another writer of the field (`fivespot.controllers.capacity.contest`): a write of the value the
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
        capacity = replace(capacity, write=None, last_write_time=prior_write_time(prior))
    requeue = min((t for t in (capacity.requeue_at, judgement.requeue_at) if t is not None), default=None)
    capacity = replace(capacity, requeue_at=requeue)
    state = judgement.state
    if state is None:
        return capacity, (None,), False
    waiting = judgement.requeue_at if not judgement.write_now else None
    message = contest.contested_message(state.manager, spec.capacity.path, target_name(spec, inp), state, waiting)
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
        bounded(f"writing {decision.write} to {decision.write_path} failed: {error}", 1024),
    )
    others = tuple(
        Observation(c.type, c.status, c.reason, c.message, c.observed_generation)
        for c in prior.conditions
        if c.type not in (cond.CAPACITY_WRITTEN, cond.READY, cond.RECONCILING, cond.STALLED)
    )
    stalled = cond.true(cond.STALLED, Reason.WRITE_FAILED, failed.message)
    conditions = cond.merge(prior.conditions, (*cond.settle(Reason.WRITE_FAILED, failed.message, stalled, None), *others, failed),
                            to_second(inp.now), inp.generation)
    return prior.model_copy(update={"conditions": conditions})


def _field_observation(spec: ScheduledCapacitySpec, inp: DecisionInput, standing: Governs | GovernedBy) -> Observation:
    if isinstance(standing, Governs) and standing.ignored:
        return cond.true(cond.FIELD_GOVERNANCE_CONFLICT, Reason.YOUNGER_IGNORED,
                         ignoring_message(field_claim(spec, inp), standing.ignored))
    claim = field_claim(spec, inp)
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
) -> Cause | None:
    """The first rule that applies, or None when a failed lookup leaves the answer open. An
    object the policies in force now deny is handed back like a closing schedule: the value
    goes to 0 (zero first, then the drain wait, as every handback), never above what the
    tenant's current limits allow, until the object complies (lowering its value is always
    admitted) or the policy is relaxed."""
    if spec.kill_switch:
        return Cause.KILL_SWITCH
    if not spec.enabled:
        return Cause.DISABLED
    if conflict is True:
        return Cause.CONFLICT
    active = schedule.active if schedule is not None else None
    if active is None:
        return None if isinstance(observed, LookupFailed) else Cause.SCHEDULE_NEVER_RESOLVED
    if not active:
        return Cause.SCHEDULE_INACTIVE
    if isinstance(policy, OutOfPolicy):
        return Cause.OUT_OF_POLICY
    if conflict is None or isinstance(policy, LookupFailed):
        return None
    return Cause.SCHEDULE_ACTIVE


_HANDBACK_UNDER_WAY: Final = frozenset(
    {Reason.AWAITING_ZERO_WRITE, Reason.AWAITING_DRAIN, Reason.DRAIN_COUNTER_UNREADABLE})


def _stalled(cause: Cause, capacity: Capacity, conflict: Observation,
             policy: PolicyObservation = WithinPolicy()) -> Observation | None:
    """Stalled=True: the controller cannot reach the desired state without a person."""
    if capacity.phase is Phase.HANDBACK_TIMED_OUT or capacity.handback.reason == Reason.HANDBACK_TIMED_OUT:
        return cond.true(cond.STALLED, Reason.HANDBACK_TIMED_OUT, capacity.summary)
    if cause is Cause.CONFLICT:
        return cond.true(cond.STALLED, Reason.HOST_GOVERNANCE_CONFLICT, conflict.message)
    if cause is Cause.OUT_OF_POLICY and isinstance(policy, OutOfPolicy):
        return cond.true(cond.STALLED, Reason.OUT_OF_POLICY, bounded(
            "the admission policies in force now deny this object, so its capacity is handed "
            "back to 0 and held there: " + "; ".join(policy.messages) + ". Change the object to "
            "comply (lowering spec.capacity.activeValue, disabling it or its kill switch is "
            "always admitted) or ask the platform team", 32768))
    return None


def _reconciling(cause: Cause, capacity: Capacity) -> Observation | None:
    """Reconciling=True: the controller is still on its way (a handback under way, a target that
    does not exist yet, a schedule that has never resolved)."""
    if capacity.handback.status is ConditionStatus.FALSE and capacity.handback.reason in _HANDBACK_UNDER_WAY:
        return cond.true(cond.RECONCILING, capacity.handback.reason, capacity.summary)
    if capacity.phase is Phase.PENDING:
        return cond.true(cond.RECONCILING, Reason.TARGET_NOT_FOUND, capacity.summary)
    if cause is Cause.SCHEDULE_NEVER_RESOLVED:
        return cond.true(cond.RECONCILING, Reason.SCHEDULE_NEVER_RESOLVED, capacity.summary)
    return None


def _ready_reason(cause: Cause, target: object) -> str:
    if cause in (Cause.KILL_SWITCH, Cause.DISABLED) or not isinstance(target, TargetNotFound):
        return str(cause.value)
    return Reason.TARGET_NOT_FOUND


def _governed_node(
    spec: ScheduledCapacitySpec, conflict: bool | None, prior: ScheduledCapacityStatus | None
) -> str | None:
    if conflict is None:
        return prior.governed_node if prior is not None else None
    return spec.node_name if not conflict else None


def _bool(value: bool) -> str:
    return "true" if value else "false"
