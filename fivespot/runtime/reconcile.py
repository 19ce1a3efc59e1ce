"""What a reconciler is handed and what it answers, in controller-runtime's shape
(`reconcile.Request`, `reconcile.Result`, the `Reconciler` interface).

The Manager turns a queued key into a `Request` only for an object of a partition this replica
leads, so a reconciler never splits keys, looks partitions up or checks leadership itself: it
reads what it needs (`Request.current()`: the newer of the cache and our own last write of the
primary object), decides, writes through the Manager's conditional writer, and answers with a
`Result` saying when to look again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from fivespot.runtime.cache import Obj


def _nothing() -> Obj | None:
    return None


@dataclass(frozen=True)
class Request:
    """One key to reconcile, already known to be in a partition this replica leads."""

    namespace: str
    name: str
    partition: str
    reader: Callable[[], Obj | None] = field(default=_nothing, compare=False, repr=False)
    """Reads the primary object (the Manager's `current`)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def current(self) -> Obj | None:
        """The primary object to decide on: the newer of the cache and our own last write
        (None: it is gone)."""
        return self.reader()


@dataclass(frozen=True)
class Result:
    """What a reconcile asks for next: nothing, a requeue after a delay, or a backoff retry."""

    requeue_after_s: float | None = None
    retry: bool = False
    """Re-queue with backoff (a transient failure); the backoff is reset by the next success."""


class Reconciler(Protocol):
    def reconcile(self, request: Request) -> Result | None: ...


def requeue_after(at: datetime | None, now: datetime, slack_s: float = 0.0) -> float | None:
    """Seconds from `now` until `at` plus `slack_s` (0 when already due), None when there is no
    `at`: the one conversion of a decision's deadline into a requeue delay."""
    if at is None:
        return None
    return max((at - now).total_seconds(), 0.0) + slack_s
