"""The forked workers of a large `fivespot check`: every run decided once, results in input
order whatever order the workers finish in, and any failure of a worker seen as one (the caller
then decides everything in one process)."""

from __future__ import annotations

import os
import time

import pytest

from fivespot.compiler.check import pool as checkpool

pytestmark = pytest.mark.unit

COUNT = 2000


def test_the_workers_give_every_result_once_in_input_order() -> None:
    def work(start: int, end: int) -> list[tuple[int, int]]:
        time.sleep(0.02 if start % 3 else 0)  # finished out of order
        return [(item, os.getpid()) for item in range(start, end)]

    found = checkpool.run(work, COUNT, jobs=2, each=list)
    assert found is not None
    assert [item for item, _ in found] == list(range(COUNT))
    assert len({pid for _, pid in found[1:]}) == 2  # both workers took runs
    assert found[0][1] == os.getpid()  # the first item is done before forking


def test_each_run_is_taken_in_by_the_parent_as_it_arrives_and_kept_in_input_order() -> None:
    parent = os.getpid()
    taken: list[tuple[int, int]] = []

    def work(start: int, end: int) -> list[int]:
        time.sleep(0.02 if start % 3 else 0)
        return list(range(start, end))

    def each(part: list[int]) -> list[tuple[int, int]]:
        taken.append((part[0], os.getpid()))
        return [(item, os.getpid()) for item in part]

    found = checkpool.run(work, COUNT, jobs=2, each=each)
    assert found == [(item, parent) for item in range(COUNT)]
    assert len(taken) == 1 + len(checkpool.guided_runs(1, COUNT, 2))  # the first item, each run
    assert {pid for _, pid in taken} == {parent}


@pytest.mark.parametrize(("count", "workers"), [(2, 2), (1000, 2), (2000, 2), (10_000, 2),
                                                (10_000, 4), (123_457, 3)])
def test_runs_cover_every_item_once_largest_first_none_below_the_minimum_but_the_last(
        count: int, workers: int) -> None:
    runs = checkpool.guided_runs(1, count, workers)
    assert [item for start, end in runs for item in range(start, end)] == list(range(1, count))
    sizes = [end - start for start, end in runs]
    assert sizes == sorted(sizes, reverse=True)
    assert all(size >= checkpool.MIN_RUN for size in sizes[:-1])
    assert sizes[0] <= -(-(count - 1) // (checkpool.SHARE * workers))


def test_runs_larger_than_a_pipe_holds_arrive_whole() -> None:
    def work(start: int, end: int) -> list[str]:
        return [f"{item}:" + "x" * 3000 for item in range(start, end)]  # ~0.75 MB a run

    found = checkpool.run(work, COUNT, jobs=2, each=list)
    assert found is not None and [int(item.split(":")[0]) for item in found] == list(range(COUNT))
    assert all(len(item) == len(f"{i}:") + 3000 for i, item in enumerate(found))


def test_a_run_the_fast_path_cannot_handle_gives_none() -> None:
    def work(start: int, end: int) -> list[int] | None:
        return None if start <= 1500 < end else list(range(start, end))

    assert checkpool.run(work, COUNT, jobs=2, each=list) is None


def _forks(monkeypatch: pytest.MonkeyPatch, fail_after: int | None = None) -> list[int]:
    """Record the pid of each child forked (failing after `fail_after` forks)."""
    real = os.fork
    pids: list[int] = []

    def fork() -> int:
        if fail_after is not None and len(pids) >= fail_after:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        pid = real()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)
    return pids


def _all_reaped(pids: list[int]) -> bool:
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        return False
    return True


def test_a_worker_that_raises_or_dies_gives_none_and_leaves_no_child(
        monkeypatch: pytest.MonkeyPatch) -> None:
    parent = os.getpid()
    pids = _forks(monkeypatch)

    def raising(start: int, end: int) -> list[int]:
        if os.getpid() != parent and start <= 1000 < end:
            raise RuntimeError("boom")
        return list(range(start, end))

    def dying(start: int, end: int) -> list[int]:
        if os.getpid() != parent and start <= 1000 < end:
            os._exit(0)  # exits "well" but sends nothing
        return list(range(start, end))

    assert checkpool.run(raising, COUNT, jobs=2, each=list) is None
    assert checkpool.run(dying, COUNT, jobs=2, each=list) is None
    assert len(pids) == 4 and _all_reaped(pids)


def test_no_process_to_fork_gives_none_and_stops_the_worker_forked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pids = _forks(monkeypatch, fail_after=1)
    assert checkpool.run(lambda s, e: list(range(s, e)), COUNT, jobs=2, each=list) is None
    assert len(pids) == 1 and _all_reaped(pids)


def test_a_small_input_is_done_in_this_process() -> None:
    found = checkpool.run(lambda s, e: [os.getpid()] * (e - s), 999, jobs=2, each=list)
    assert found == [os.getpid()] * 999
