"""One provider reconcile as a pure decision: from the object as cached and the time, what to
write and when to look again.

The provider kinds' `evaluate` already decide the status; this adds what the controller shell
needs around it, so the shell only performs I/O:
- the write is a merge patch of `/status` carrying `metadata.resourceVersion` as a precondition.
  The status is computed from the cached object; if the cache is behind (our own previous write,
  or a spec edit, not yet seen on the watch) the API server refuses the patch with 409 instead
  of letting a stale computation move `lastTransitionTime`, and the watch event that is already
  on its way brings the reconcile that gets it right;
- the requeue is a delay until the next boundary computed from the same `now`, never a poll; a
  boundary already past (a slow reconcile) is due at once;
- the Events a status write tells (an override started or ended, `override.events`) are part of
  the plan, for the shell to record once the write landed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from fivespot.controllers.spotschedules.override import Event, events
from fivespot.runtime.reconcile import requeue_after

Evaluate = Callable[
    [Mapping[str, Any] | None, int, Mapping[str, Any] | None, dt.datetime],
    tuple[dict[str, Any] | None, dt.datetime | None],
]
"""A provider kind's `evaluate(spec, generation, prior_status, now)`."""

NO_GENERATION: Final = 0


@dataclass(frozen=True)
class Plan:
    """What one reconcile does: the body of the status merge patch (None: write nothing) and
    the delay in seconds until the object must be reconciled again (None: only on an event)."""

    patch: dict[str, Any] | None
    requeue_after_s: float | None
    requeue_at: dt.datetime | None
    events: tuple[Event, ...] = ()


def plan(obj: Mapping[str, Any], evaluate: Evaluate, now: dt.datetime) -> Plan:
    """The reconcile of `obj` (a provider object as the API server serves it) at `now`."""
    metadata = obj.get("metadata")
    meta: Mapping[str, Any] = metadata if isinstance(metadata, Mapping) else {}
    raw_spec = obj.get("spec")
    spec = raw_spec if isinstance(raw_spec, Mapping) else None
    raw_status = obj.get("status")
    status = raw_status if isinstance(raw_status, Mapping) else None
    generation = meta.get("generation")
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 0:
        generation = NO_GENERATION
    patch, requeue_at = evaluate(spec, generation, status, now)
    told = tuple(events(status, patch, now))
    if patch is not None and meta.get("resourceVersion") is not None:
        patch = {"metadata": {"resourceVersion": str(meta["resourceVersion"])}, **patch}
    return Plan(patch, requeue_after(requeue_at, now), requeue_at, told)
