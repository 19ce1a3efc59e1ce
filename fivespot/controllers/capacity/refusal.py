"""Refusals: a spec the controller may not act on (phase Error, never a write — not even 0), and
the fields it must leave to another governor (an older ScheduledCapacity, an autoscaler).

Checked before anything else, including the kill switch: a field the controller may not name
cannot be written. Re-checked by the shell right before a write (`guard_write`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from fivespot.api.bundle import Consumer
from fivespot.api.fieldgovernance import (
    Claim,
    GovernedBy,
    OtherWriter,
    autoscaled_message,
    governed_by_message,
)
from fivespot.api.fieldpath import capacity_path_error, drained_path_error
from fivespot.api.kinds.scheduled_capacity import Phase, ScheduledCapacitySpec, ScheduledCapacityStatus
from fivespot.controllers.capacity import conditions as cond
from fivespot.controllers.capacity.conditions import Observation, Reason
from fivespot.controllers.capacity.decision import Decision, Refusal, bounded
from fivespot.controllers.capacity.events import decision_events
from fivespot.controllers.capacity.observations import DecisionInput, InvalidSpec


def refusal(spec: ScheduledCapacitySpec | InvalidSpec, entry: Consumer | None) -> Refusal | None:
    """Why this spec may not be acted on with this allowlist entry, or None when it may.

    Re-checks the field-path rule itself rather than trusting the model, because the spec may
    have come through an older CRD and the model is only as strict as this module's version.
    """
    if isinstance(spec, InvalidSpec):
        return invalid_spec(spec)
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


def invalid_spec(spec: InvalidSpec) -> Refusal:
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
    return Refusal(Reason.INVALID_SPEC, bounded(f"fix the spec: {detail}", 2048))


def refuse(inp: DecisionInput, problem: Refusal, now: datetime, field_obs: Observation | None = None,
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
        events=decision_events(inp.prior, status, None, None, inp),
    )


def field_claim(spec: ScheduledCapacitySpec, inp: DecisionInput) -> Claim:
    ref = spec.target_ref
    return Claim(inp.namespace, inp.name, ref.api_version, ref.kind, ref.name, spec.capacity.path)


def yield_field(
    inp: DecisionInput, spec: ScheduledCapacitySpec, standing: GovernedBy, now: datetime
) -> Decision:
    """An older ScheduledCapacity governs the field: Error, and nothing at all is written (not
    even 0: the field is the governor's), whatever this object's schedule, kill switch or
    enabled say. The next reconcile after the governor is gone takes the field over."""
    message = governed_by_message(field_claim(spec, inp), standing.governor)
    field_obs = cond.true(cond.FIELD_GOVERNANCE_CONFLICT, Reason.GOVERNED_BY_OLDER, message)
    problem = Refusal(Reason.GOVERNED_BY_OLDER, message.rstrip("."))
    return refuse(inp, problem, now, field_obs,
                   not_evaluated="not evaluated: another ScheduledCapacity governs the field")


def yield_to_autoscaler(
    inp: DecisionInput, spec: ScheduledCapacitySpec, writer: OtherWriter, now: datetime
) -> Decision:
    """An HPA or a KEDA ScaledObject scales the field's object: a governor fivespot does not
    run, so this object writes nothing (as when an older ScheduledCapacity governs) and says
    what to gate instead, in the words of the webhook and `fivespot check`."""
    message = autoscaled_message(field_claim(spec, inp), writer)
    field_obs = cond.true(cond.FIELD_GOVERNANCE_CONFLICT, Reason.SCALED_BY_AUTOSCALER, message)
    problem = Refusal(Reason.SCALED_BY_AUTOSCALER, message)
    return refuse(inp, problem, now, field_obs,
                   not_evaluated="not evaluated: an autoscaler governs the field")
