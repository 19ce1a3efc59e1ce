"""ManualSchedule: a toggle. `spec.enabled` is published as `status.active`, nothing else.

It exists so an operator can hold capacity up or down by hand through the same provider
contract every consumer already follows. There is no calendar, so the only requeue is at the
expiry of a `spec.override` (`override.py`); otherwise the provider reacts to spec edits only.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, Final

from fivespot.api.kinds.providers import ManualScheduleSpec
from fivespot.controllers.spotschedules.override import with_override
from fivespot.controllers.spotschedules.status import Decision, evaluate_spec

REASON_RECONCILED: Final = "Reconciled"
MESSAGE: Final = "manual toggle applied"


def is_active(spec: ManualScheduleSpec, now: dt.datetime) -> bool:
    """Whether the toggle is on. `now` is accepted for symmetry with the calendar kinds."""
    return spec.enabled


def next_transition(spec: ManualScheduleSpec, now: dt.datetime) -> dt.datetime | None:
    """Always None: only a spec edit flips a manual toggle."""
    return None


def decide(spec: ManualScheduleSpec, now: dt.datetime) -> Decision:
    """The status-relevant outcome at `now`."""
    return Decision(spec.enabled, None, REASON_RECONCILED, MESSAGE)


def evaluate(
    spec: Mapping[str, Any] | None,
    generation: int,
    prior_status: Mapping[str, Any] | None,
    now: dt.datetime,
) -> tuple[dict[str, Any] | None, dt.datetime | None]:
    """The status merge patch to write (None if nothing changed) and when to reconcile next:
    an override's expiry, else never. An invalid spec is reported as Ready=False."""
    return evaluate_spec(ManualScheduleSpec, with_override(decide), spec, generation, prior_status,
                         now)
