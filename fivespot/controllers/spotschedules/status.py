"""The provider contract's status, computed the same way for every built-in provider.

Consumers read only `status`, so what a provider publishes and when it writes matters more than
how it decides. The rules, all pure functions of their inputs:
- `lastTransitionTime` moves only when `active` flips (the first publish sets it);
- the Ready condition's `lastTransitionTime` moves only when Ready's status changes;
- `observedGeneration` is the generation the status was computed from;
- `nextTransitionTime` is the next flip in RFC 3339 UTC, absent when there is none;
- `overrideUntil` is present exactly while `spec.override` decides (`override.py`);
- nothing is written when nothing changed (`status_patch` returns None), so a reconcile with no
  news does not wake every watcher of the object;
- an invalid spec is reported, never raised: Ready=False with the validation errors, `active`
  held at its last value (consumers hold their own state while Ready is not True), and
  Stalled=True with the same reason, so kstatus (Flux `wait`) and the Argo CD health Lua read it
  as Failed / Degraded, not as still in progress; Stalled is present only while True.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ValidationError

from fivespot.api import conditions as kstatus
from fivespot.api.kinds.providers import Condition, ProviderStatus
from fivespot.api.kinds.scheduled_capacity import ConditionStatus
from fivespot.controllers.spotschedules import intervals
from fivespot.controllers.spotschedules.intervals import require_aware

READY: Final = kstatus.READY
STALLED: Final = kstatus.STALLED
REASON_INVALID_SPEC: Final = "InvalidSpec"
MAX_REPORTED_ERRORS: Final = 5
MAX_MESSAGE_LENGTH: Final = 2048

_OWNED_FIELDS: Final = (
    "active",
    "observedGeneration",
    "lastTransitionTime",
    "nextTransitionTime",
    "overrideUntil",
    "conditions",
)
_UTC: Final = dt.timezone.utc
_STATUS: Final[dict[ConditionStatus, Literal["True", "False", "Unknown"]]] = {
    ConditionStatus.TRUE: "True", ConditionStatus.FALSE: "False", ConditionStatus.UNKNOWN: "Unknown"}

SpecT = TypeVar("SpecT", bound=BaseModel)


@dataclass(frozen=True)
class Decision:
    """What a provider concluded from a valid spec at one instant. `ready` False means it cannot
    answer (a holiday calendar's data does not cover the date): Ready=False with the reason,
    `active` held at its last value. `requeue_at` is when to look again when that is not the
    next transition (the day the data stops covering)."""

    active: bool
    next_transition: dt.datetime | None
    reason: str
    message: str
    ready: bool = True
    requeue_at: dt.datetime | None = None
    override_until: dt.datetime | None = None
    """Set while `spec.override` decides (`fivespot.controllers.spotschedules.override`)."""

    @property
    def wake_at(self) -> dt.datetime | None:
        """When to reconcile again: the earliest of the next transition, `requeue_at` and the
        override's expiry (while one holds the published next flip may be later, or unknown)."""
        found = [t for t in (self.next_transition, self.requeue_at, self.override_until)
                 if t is not None]
        return min(found) if found else None


def window_decision(plan: intervals.DayPlan, zone: ZoneInfo, now: dt.datetime,
                    opened: tuple[str, str], closed: tuple[str, str]) -> Decision:
    """Open or closed at `now` by a day plan in `zone`, and the next flip either way; `opened`
    and `closed` are each state's (reason, message)."""
    following = intervals.next_transition(plan, zone, now)
    if intervals.is_active(plan, zone, now):
        return Decision(True, following, *opened)
    return Decision(False, following, *closed)


def rfc3339(instant: dt.datetime) -> str:
    """`instant` in UTC to the second, the way Kubernetes writes metav1.Time."""
    return require_aware(instant).astimezone(_UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_prior_status(raw: object) -> ProviderStatus | None:
    """The previously published status, or None if there is none this provider can build on.

    Read leniently, field by field: a status without a boolean `active` or a parseable
    `lastTransitionTime` counts as never published, and malformed conditions are dropped (the
    next write replaces them)."""
    if not isinstance(raw, Mapping):
        return None
    active = raw.get("active")
    since = raw.get("lastTransitionTime")
    if not isinstance(active, bool) or not _is_timestamp(since):
        return None
    generation = raw.get("observedGeneration")
    upcoming = raw.get("nextTransitionTime")
    until = raw.get("overrideUntil")
    conditions = raw.get("conditions")
    parsed: list[Condition] = []
    for item in conditions if isinstance(conditions, list) else ():
        try:
            parsed.append(Condition.model_validate(item))
        except ValidationError:
            continue
    return ProviderStatus(
        active=active,
        observed_generation=(
            generation
            if isinstance(generation, int) and not isinstance(generation, bool) and generation >= 0
            else 0
        ),
        last_transition_time=str(since),
        next_transition_time=upcoming if _is_timestamp(upcoming) else None,
        override_until=until if _is_timestamp(until) else None,
        conditions=tuple(parsed),
    )


def desired_status(
    *,
    active: bool,
    next_transition: dt.datetime | None,
    generation: int,
    prior: ProviderStatus | None,
    now: dt.datetime,
    ready: tuple[bool, str, str],
    override_until: dt.datetime | None = None,
) -> ProviderStatus:
    """The status to publish. `ready` is (status, reason, message) of the Ready condition;
    conditions of other types in `prior` are kept as they are."""
    stamp = rfc3339(now)
    since = prior.last_transition_time if prior is not None and prior.active == active else stamp
    is_ready, reason, message = ready
    # Not ready is always Stalled here (the module docstring): api.conditions' rule for the pair.
    ready_observed, *stalled = (kstatus.settled(reason, message) if is_ready
                                else kstatus.stalled(reason, message))

    def condition(observed: kstatus.Observation) -> Condition:
        status = _STATUS[observed.status]
        old = prior.condition(observed.type) if prior is not None else None
        return Condition(
            type=observed.type, status=status, reason=observed.reason, message=observed.message,
            last_transition_time=(old.last_transition_time
                                  if old is not None and old.status == status else stamp))

    conditions = [c for c in prior.conditions if c.type != STALLED] if prior is not None else []
    position = next((i for i, c in enumerate(conditions) if c.type == READY), None)
    if position is None:
        conditions.append(condition(ready_observed))
    else:
        conditions[position] = condition(ready_observed)
    conditions += [condition(observed) for observed in stalled]
    return ProviderStatus(
        active=active,
        observed_generation=generation,
        last_transition_time=since,
        next_transition_time=rfc3339(next_transition) if next_transition is not None else None,
        override_until=rfc3339(override_until) if override_until is not None else None,
        conditions=tuple(conditions),
    )


def status_patch(
    prior: Mapping[str, Any] | ProviderStatus | None, desired: ProviderStatus
) -> dict[str, Any] | None:
    """The JSON merge patch body `{"status": {...}}` that makes the published status `desired`,
    or None when it already is. A field `desired` leaves out is deleted with an explicit null."""
    body = desired.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(prior, ProviderStatus):
        old: Mapping[str, Any] = prior.model_dump(mode="json", by_alias=True, exclude_none=True)
    else:
        old = prior if isinstance(prior, Mapping) else {}
    removed = {key: None for key in _OWNED_FIELDS if key not in body and old.get(key) is not None}
    if not removed and all(old.get(key) == value for key, value in body.items()):
        return None
    return {"status": {**body, **removed}}


def spec_error_message(error: ValidationError) -> str:
    """A Ready message that says which spec fields are wrong and how, for `kubectl describe`."""
    problems = []
    for item in error.errors(include_url=False)[:MAX_REPORTED_ERRORS]:
        text = str(item["msg"]).removeprefix("Value error, ")
        problems.append(f"{_field_path(item['loc'])}: {text}")
    more = error.error_count() - len(problems)
    if more > 0:
        problems.append(f"and {more} more")
    message = (
        "the spec is invalid, so status.active keeps its last value until it is fixed: "
        + "; ".join(problems)
    )
    if len(message) > MAX_MESSAGE_LENGTH:
        return message[: MAX_MESSAGE_LENGTH - 3] + "..."
    return message


def evaluate_spec(
    model: type[SpecT],
    decide: Callable[[SpecT, dt.datetime], Decision],
    spec: Mapping[str, Any] | None,
    generation: int,
    prior_status: Mapping[str, Any] | None,
    now: dt.datetime,
) -> tuple[dict[str, Any] | None, dt.datetime | None]:
    """One reconcile of one provider object: validate `spec` with `model`, `decide`, and return
    the status patch to write (None if nothing changed) and when to reconcile again (None: on
    the next event only). An invalid spec yields Ready=False and no requeue; a spec edit brings
    the next event."""
    require_aware(now)
    prior = read_prior_status(prior_status)
    try:
        parsed = model.model_validate(spec)
    except ValidationError as error:
        held = prior.active if prior is not None else False
        desired = desired_status(
            active=held,
            next_transition=None,
            generation=generation,
            prior=prior,
            now=now,
            ready=(False, REASON_INVALID_SPEC, spec_error_message(error)),
        )
        return status_patch(prior_status, desired), None
    decision = decide(parsed, now)
    held = prior.active if prior is not None else False
    desired = desired_status(
        active=decision.active if decision.ready else held,
        next_transition=decision.next_transition if decision.ready else None,
        generation=generation,
        prior=prior,
        now=now,
        ready=(decision.ready, decision.reason, decision.message),
        override_until=decision.override_until,
    )
    return status_patch(prior_status, desired), decision.wake_at


def _field_path(loc: tuple[int | str, ...]) -> str:
    path = "spec"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _is_timestamp(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return False
    return parsed.tzinfo is not None
