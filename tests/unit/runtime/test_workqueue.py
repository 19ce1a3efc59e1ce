"""The work queue keeps client-go's promises: one entry per key, never one key in two workers,
re-adds during processing are not lost, delays keep the earliest time, failures back off."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone

import pytest

from fivespot.runtime.reconcile import Result
from fivespot.runtime.workers import Workers
from fivespot.runtime.workqueue import ExponentialBackoff, WorkQueue


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def monotonic(self) -> float:
        return self.t

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.t, timezone.utc)


def test_a_key_added_many_times_is_handed_out_once() -> None:
    queue = WorkQueue("t1", clock=FakeClock())
    for _ in range(5):
        queue.add("ns/a")
    queue.add("ns/b")
    assert len(queue) == 2
    assert queue.get(0) == "ns/a"
    assert queue.get(0) == "ns/b"
    assert queue.get(0) is None


def test_a_key_being_processed_is_not_handed_to_a_second_worker_but_requeued_on_done() -> None:
    queue = WorkQueue("t2", clock=FakeClock())
    queue.add("k")
    assert queue.get(0) == "k"
    queue.add("k")
    assert queue.get(0) is None, "the same key must not go to a second worker"
    queue.done("k")
    assert queue.get(0) == "k", "the add made while processing must not be lost"
    queue.done("k")
    assert queue.get(0) is None


def test_add_after_becomes_ready_only_when_due_and_the_earliest_time_wins() -> None:
    clock = FakeClock()
    queue = WorkQueue("t3", clock=clock)
    queue.add_after("k", 10)
    queue.add_after("k", 30)  # later: ignored
    queue.add_after("k", 5)  # earlier: wins
    assert queue.get(0) is None
    clock.t += 4.9
    assert queue.get(0) is None
    clock.t += 0.2
    assert queue.get(0) == "k"
    queue.done("k")
    clock.t += 100
    assert queue.get(0) is None, "the superseded delays must not fire again"


def test_a_delayed_key_that_is_also_queued_now_is_handed_out_once_now() -> None:
    clock = FakeClock()
    queue = WorkQueue("t4", clock=clock)
    queue.add_after("k", 5)
    queue.add("k")
    assert queue.get(0) == "k"
    assert queue.get(0) is None


def test_failures_back_off_exponentially_per_key_and_forget_resets() -> None:
    clock = FakeClock()
    queue = WorkQueue("t5", clock=clock, backoff=ExponentialBackoff(base_s=1, max_s=5))
    assert [queue.add_rate_limited("a") for _ in range(5)] == [1, 2, 4, 5, 5]
    assert queue.add_rate_limited("b") == 1, "backoff is per key"
    assert queue.num_requeues("a") == 5
    queue.forget("a")
    assert queue.num_requeues("a") == 0
    assert queue.add_rate_limited("a") == 1


def test_shutdown_wakes_a_blocked_get_with_none_and_ignores_later_adds() -> None:
    queue = WorkQueue("t6")
    got: list[str | None] = []
    thread = threading.Thread(target=lambda: got.append(queue.get()))
    thread.start()
    time.sleep(0.05)
    queue.shutdown()
    thread.join(2)
    assert got == [None]
    queue.add("k")
    assert len(queue) == 0


def test_a_blocked_get_wakes_when_a_delayed_key_falls_due() -> None:
    queue = WorkQueue("t7")
    queue.add_after("k", 0.05)
    started = time.monotonic()
    assert queue.get(timeout=2) == "k"
    assert 0.04 <= time.monotonic() - started < 1.5


def test_two_workers_never_reconcile_the_same_key_concurrently() -> None:
    queue = WorkQueue("t8")
    active: set[str] = set()
    overlaps: list[str] = []
    lock = threading.Lock()
    seen = 0

    def reconcile(key: str) -> Result:
        nonlocal seen
        with lock:
            if key in active:
                overlaps.append(key)
            active.add(key)
            seen += 1
        time.sleep(0.001)
        with lock:
            active.discard(key)
        return Result()

    controller = Workers("t8", queue, reconcile, workers=4)
    controller.start()
    for i in range(300):
        queue.add(f"k{i % 3}")
    deadline = time.monotonic() + 5
    while (len(queue) or queue.processing()) and time.monotonic() < deadline:
        time.sleep(0.01)
    controller.stop()
    assert not overlaps
    assert seen >= 3


def test_a_reconcile_that_raises_is_retried_with_backoff_and_a_success_resets_it() -> None:
    clock = FakeClock()
    queue = WorkQueue("t9", clock=clock, backoff=ExponentialBackoff(base_s=1, max_s=10))
    outcomes = iter([RuntimeError("boom"), RuntimeError("boom"), None])

    def reconcile(key: str) -> Result:
        outcome = next(outcomes)
        if outcome is not None:
            raise outcome
        return Result(requeue_after_s=7)

    controller = Workers("t9", queue, reconcile)
    queue.add("k")
    assert controller.process_one(0)
    assert queue.delayed()["k"] == pytest.approx(clock.t + 1)
    clock.t += 1
    assert controller.process_one(0)
    assert queue.delayed()["k"] == pytest.approx(clock.t + 2)
    clock.t += 2
    assert controller.process_one(0)
    assert queue.num_requeues("k") == 0
    assert queue.delayed()["k"] == pytest.approx(clock.t + 7), "Result.requeue_after_s schedules the next look"


# --- the later lane -------------------------------------------------------------------------------


def test_a_key_in_the_later_lane_waits_until_the_first_lane_is_empty() -> None:
    queue = WorkQueue("lanes1", clock=FakeClock())
    queue.add_later("status/a")
    queue.add("write/b")
    queue.add("write/c")
    assert len(queue) == 3
    assert [queue.get(0), queue.get(0), queue.get(0), queue.get(0)] == [
        "write/b", "write/c", "status/a", None]


def test_a_key_added_to_both_lanes_is_handed_out_once_from_the_first() -> None:
    queue = WorkQueue("lanes2", clock=FakeClock())
    queue.add_later("k")
    queue.add_later("other")
    queue.add("k")
    queue.add_later("k")  # already in the first lane: stays there
    assert queue.later() == ["other"]
    assert [queue.get(0), queue.get(0), queue.get(0)] == ["k", "other", None]
    assert len(queue) == 0


def test_a_later_add_while_processing_is_queued_in_the_later_lane_on_done() -> None:
    queue = WorkQueue("lanes3", clock=FakeClock())
    queue.add("k")
    assert queue.get(0) == "k"
    queue.add_later("k")
    queue.add("j")
    queue.done("k")
    assert queue.later() == ["k"]
    assert [queue.get(0), queue.get(0), queue.get(0)] == ["j", "k", None]


def test_a_first_lane_add_while_processing_wins_over_a_later_one() -> None:
    queue = WorkQueue("lanes4", clock=FakeClock())
    queue.add("k")
    assert queue.get(0) == "k"
    queue.add_later("k")
    queue.add("k")
    queue.add_later("other")
    queue.done("k")
    assert queue.later() == ["other"]
    assert [queue.get(0), queue.get(0), queue.get(0)] == ["k", "other", None]


def test_a_later_key_that_waited_too_long_goes_ahead_of_a_busy_first_lane() -> None:
    clock = FakeClock()
    queue = WorkQueue("lanes5", clock=clock, starve_after_s=30)
    queue.add_later("status")
    for i in range(3):
        queue.add(f"write-{i}")
    assert queue.get(0) == "write-0"
    clock.t += 30
    assert queue.get(0) == "status"
    assert [queue.get(0), queue.get(0), queue.get(0)] == ["write-1", "write-2", None]
