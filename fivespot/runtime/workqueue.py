"""A work queue of object keys with client-go's semantics, which are what make level-triggered
reconciling safe with several workers:

- a key is queued at most once however often it is added (events collapse: the reconcile reads
  the current state anyway, so ten events for one object are one reconcile);
- a key is never handed to two workers at once; if it is added while a worker holds it, it is
  queued again when that worker calls `done` (the new event is not lost, and not raced);
- `add_after` keeps a heap of delayed keys, keeping only the earliest time per key, so a requeue
  at a deadline (a handback timeout) costs nothing until it is due;
- `add_rate_limited` backs off per key exponentially (transient API errors), and `forget` resets
  it after a success;
- `add_later` queues a key in a second, lower lane: it is handed out only when no key in the
  first lane is ready (or once it has waited `starve_after_s`), so follow-up work such as a
  status write never delays the writes a burst is waiting for. A key added to both lanes is
  queued once, in the first.

Time comes from an injected clock; `get(timeout=0)` never blocks, which is how the tests drive a
fake clock.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import deque
from typing import Final

from fivespot.runtime import metrics
from fivespot.runtime.clock import SYSTEM_CLOCK, Clock

DEFAULT_BASE_DELAY_S: Final = 0.05
DEFAULT_MAX_DELAY_S: Final = 60.0
DEFAULT_STARVE_AFTER_S: Final = 30.0
"""A key in the later lane is handed out after this long even while the first lane is busy."""


class ExponentialBackoff:
    """Per-key delay base * 2**failures, capped; `forget` starts a key over."""

    def __init__(self, base_s: float = DEFAULT_BASE_DELAY_S, max_s: float = DEFAULT_MAX_DELAY_S):
        if base_s <= 0 or max_s < base_s:
            raise ValueError("need 0 < base_s <= max_s")
        self.base_s = base_s
        self.max_s = max_s
        self._failures: dict[str, int] = {}

    def when(self, key: str) -> float:
        """The delay before retrying `key`, counting this failure."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        if failures >= 64:
            return self.max_s
        return float(min(self.max_s, self.base_s * (2 ** failures)))

    def failures(self, key: str) -> int:
        return self._failures.get(key, 0)

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)


class WorkQueue:
    """De-duplicating, delay-capable, per-key rate-limited queue of string keys."""

    def __init__(
        self,
        name: str = "queue",
        *,
        clock: Clock = SYSTEM_CLOCK,
        backoff: ExponentialBackoff | None = None,
        starve_after_s: float = DEFAULT_STARVE_AFTER_S,
    ):
        self.name = name
        self._starve_after_s = starve_after_s
        self._clock = clock
        self._backoff = backoff or ExponentialBackoff()
        self._cond = threading.Condition()
        self._queue: deque[str] = deque()
        self._later: deque[tuple[int, str]] = deque()
        """The lower lane, oldest first: (ticket, key); an entry whose ticket is no longer the
        key's in `_dirty_later` was promoted or taken, and is skipped."""
        self._dirty: set[str] = set()
        self._dirty_later: dict[str, tuple[int, float]] = {}
        """Keys queued (or, while processing, to be queued again) in the later lane only, with
        their ticket and when they were queued (ticket -1: not in the deque yet)."""
        self._later_ready = 0
        """How many `_later` entries are live."""
        self._processing: set[str] = set()
        self._waiting: dict[str, float] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._shutdown = False
        self._depth = metrics.QUEUE_DEPTH.labels(queue=name)
        self._adds = metrics.QUEUE_ADDS.labels(queue=name)
        self._retries = metrics.QUEUE_RETRIES.labels(queue=name)

    # --- adding ---------------------------------------------------------------------------------

    def add(self, key: str) -> None:
        """Queue `key` now, unless it is already queued."""
        with self._cond:
            self._add_locked(key)

    def add_later(self, key: str) -> None:
        """Queue `key` in the lower lane, unless it is already queued in either lane."""
        with self._cond:
            if self._shutdown or key in self._dirty or key in self._dirty_later:
                return
            self._adds.inc()
            if key in self._processing:
                self._dirty_later[key] = (-1, 0.0)  # queued when the worker is done
                return
            self._append_later_locked(key)
            self._cond.notify()

    def add_after(self, key: str, delay_s: float) -> None:
        """Queue `key` after `delay_s`; an earlier pending time for the same key wins."""
        if delay_s <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutdown:
                return
            ready_at = self._clock.monotonic() + delay_s
            current = self._waiting.get(key)
            if current is not None and current <= ready_at:
                return
            self._waiting[key] = ready_at
            heapq.heappush(self._heap, (ready_at, next(self._seq), key))
            self._cond.notify()

    def add_rate_limited(self, key: str) -> float:
        """Queue `key` after its next backoff delay (a failure); returns the delay."""
        with self._cond:
            delay = self._backoff.when(key)
        self._retries.inc()
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        """Reset `key`'s backoff (it succeeded). Does not remove it from the queue."""
        with self._cond:
            self._backoff.forget(key)

    def num_requeues(self, key: str) -> int:
        with self._cond:
            return self._backoff.failures(key)

    # --- taking ---------------------------------------------------------------------------------

    def get(self, timeout: float | None = None) -> str | None:
        """The next key, marked as processing; None on shutdown or when `timeout` passes.

        `timeout=None` blocks until a key or shutdown; `timeout=0` never blocks.
        """
        with self._cond:
            deadline = None if timeout is None else self._clock.monotonic() + timeout
            while True:
                self._promote_due_locked()
                key = self._pop_locked()
                if key is not None:
                    self._processing.add(key)
                    self._set_depth_locked()
                    return key
                if self._shutdown:
                    return None
                now = self._clock.monotonic()
                waits = [] if deadline is None else [deadline - now]
                if self._heap:
                    waits.append(self._heap[0][0] - now)
                wait = min(waits) if waits else None
                if deadline is not None and now >= deadline:
                    return None
                self._cond.wait(None if wait is None else max(wait, 0.0))

    def done(self, key: str) -> None:
        """A worker finished `key`; if it was added meanwhile, it is queued again now."""
        with self._cond:
            self._processing.discard(key)
            if self._shutdown:
                return
            if key in self._dirty:
                self._queue.append(key)
            elif key in self._dirty_later:
                self._append_later_locked(key)
            else:
                return
            self._set_depth_locked()
            self._cond.notify()

    # --- lifecycle and introspection ------------------------------------------------------------

    def shutdown(self) -> None:
        """Wake every waiting `get` with None; later adds are ignored."""
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    @property
    def shutting_down(self) -> bool:
        with self._cond:
            return self._shutdown

    def __len__(self) -> int:
        """Keys ready now in either lane (not counting delayed ones or those being processed)."""
        with self._cond:
            return len(self._queue) + self._later_ready

    def later(self) -> list[str]:
        """The keys queued in the lower lane, oldest first."""
        with self._cond:
            return [key for ticket, key in self._later if self._dirty_later.get(key, (None,))[0] == ticket]

    def delayed(self) -> dict[str, float]:
        """Delayed keys and the monotonic time each becomes due."""
        with self._cond:
            return dict(self._waiting)

    def processing(self) -> frozenset[str]:
        with self._cond:
            return frozenset(self._processing)

    # --- internals ------------------------------------------------------------------------------

    def _add_locked(self, key: str) -> None:
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        self._adds.inc()
        promoted = self._dirty_later.pop(key, None)  # its later-lane entry, if any, is skipped
        if promoted is not None and promoted[0] >= 0:
            self._later_ready -= 1
        if key in self._processing:
            return
        self._queue.append(key)
        self._set_depth_locked()
        self._cond.notify()

    def _append_later_locked(self, key: str) -> None:
        ticket = next(self._seq)
        self._dirty_later[key] = (ticket, self._clock.monotonic())
        self._later.append((ticket, key))
        self._later_ready += 1
        self._set_depth_locked()

    def _set_depth_locked(self) -> None:
        self._depth.set(len(self._queue) + self._later_ready)

    def _pop_locked(self) -> str | None:
        """The first lane's next key; the later lane's when the first is empty or its oldest key
        has waited `starve_after_s`."""
        while self._later and self._dirty_later.get(self._later[0][1], (None,))[0] != self._later[0][0]:
            self._later.popleft()  # promoted or superseded
        starved = bool(self._later) and self._clock.monotonic() - \
            self._dirty_later[self._later[0][1]][1] >= self._starve_after_s
        if self._queue and not starved:
            key = self._queue.popleft()
            self._dirty.discard(key)
            return key
        if self._later:
            _, key = self._later.popleft()
            del self._dirty_later[key]
            self._later_ready -= 1
            return key
        return None

    def _promote_due_locked(self) -> None:
        now = self._clock.monotonic()
        while self._heap and self._heap[0][0] <= now:
            ready_at, _, key = heapq.heappop(self._heap)
            if self._waiting.get(key) != ready_at:
                continue  # superseded by an earlier time for the same key
            del self._waiting[key]
            self._add_locked(key)
