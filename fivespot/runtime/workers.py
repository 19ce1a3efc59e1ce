"""The worker pool: take a key from the queue, reconcile it, and decide when to see it again.

A reconcile is level-triggered: it gets only a key, reads the current state (from caches and
the API server) and acts on the difference, so it does not matter how many events led to it or
whether some were missed. Its `Result` says when to look again (a deadline such as a handback
timeout); an exception or `Result(retry=True)` re-queues the key with per-key exponential
backoff, which is how a transient API error is retried without flipping anything.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from fivespot.runtime import metrics
from fivespot.runtime.reconcile import Result
from fivespot.runtime.workqueue import WorkQueue

log = logging.getLogger("fivespot.controller")


Reconcile = Callable[[str], Result | None]


class Workers:
    """A pool of `workers` threads draining `queue` into `reconcile(key)`: the part of a
    controller that runs reconciles (the Manager hands it the reconcile to run)."""

    def __init__(self, name: str, queue: WorkQueue, reconcile: Reconcile, *, workers: int = 2):
        self.name = name
        self.queue = queue
        self._reconcile = reconcile
        self._workers = workers
        self._threads: list[threading.Thread] = []
        self._duration = metrics.RECONCILE_DURATION.labels(controller=name)
        self._errors = metrics.RECONCILE_ERRORS.labels(controller=name)
        self.last_loop: float = time.monotonic()

    def start(self) -> None:
        for index in range(self._workers):
            thread = threading.Thread(target=self._work, name=f"{self.name}-worker-{index}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Shut the queue down and wait for in-flight reconciles to finish."""
        self.queue.shutdown()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0.0))

    def wait_idle(self, match: Callable[[str], bool], timeout_s: float) -> bool:
        """Wait until no key `match` accepts is being reconciled (a partition handed back: its
        in-flight writes must land before its lease is released); False on timeout."""
        deadline = time.monotonic() + timeout_s
        while any(match(key) for key in self.queue.processing()):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def alive(self) -> bool:
        return all(t.is_alive() for t in self._threads) and bool(self._threads)

    def process_one(self, timeout: float | None = None) -> bool:
        """Reconcile one key (for tests and the worker loop); False when the queue gave none."""
        key = self.queue.get(timeout)
        if key is None:
            return False
        started = time.perf_counter()
        try:
            result = self._reconcile(key) or Result()
        except Exception:
            self._errors.inc()
            delay = self.queue.add_rate_limited(key)
            log.exception("reconcile failed; retrying", extra={"key": key, "retry_in_s": round(delay, 3)})
            return True
        finally:
            self._duration.observe(time.perf_counter() - started)
            self.queue.done(key)
        if result.retry:
            self._errors.inc()
            self.queue.add_rate_limited(key)
            return True
        self.queue.forget(key)
        if result.requeue_after_s is not None:
            self.queue.add_after(key, result.requeue_after_s)
        return True

    def _work(self) -> None:
        while not self.queue.shutting_down:
            self.last_loop = time.monotonic()
            self.process_one()  # blocks until a key is due or the queue shuts down
