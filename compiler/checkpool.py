"""Reading and deciding many objects on every core the process may use.

A large `fivespot check` is split across forked workers: the parent finds where each document
of the input starts (cheap whole-text scans), and each worker inherits the compiled checker and
the input's text, then reads, decides and sums up runs of documents — YAML parsing is a third
of the work, so it is shared too — and sends back only the results, which are put back in
input order: the output is the same bytes as a single process's. Small inputs, one usable core,
or a platform without `fork` are done in this process.

The workers are plain `os.fork` children that take run numbers from one pipe and each send
their results down a pipe of their own, then leave with `os._exit`: `multiprocessing.Pool`
would do the same after importing its machinery and starting three threads, about 30 ms, a
twentieth of a 2,000-object run. A worker that fails in any way sends nothing, and the caller
then does it all in one process.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import signal
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

MIN_PER_WORKER: Final = 500
"""Below this many documents per worker, forking costs more than it saves."""
SLICES_PER_WORKER: Final = 4
"""Runs of documents handed out per worker: more than one, so a worker slowed by another
process on its core does not hold up the others."""
_TOKEN: Final = 2
"""Bytes of one run number in the runs pipe (a read of that many is atomic among readers)."""

T = TypeVar("T")


def run(work: Callable[[int, int], list[T] | None], count: int, jobs: int | None = None
        ) -> list[T] | None:
    """`work(start, end)` (the results for items start..end-1, or None when one of them is not
    what the caller's fast path handles) over range(count), on at most `jobs` processes
    (default: the usable cores), the results concatenated in order; None when any part gave
    None or a worker failed."""
    workers = min(jobs or usable_cores(), count // MIN_PER_WORKER)
    if workers < 2 or not hasattr(os, "fork"):
        return work(0, count)
    # The first item is done here, before forking: what the checker builds on first use (the
    # schema, the match plan and the batched program of the policies a request matches) is
    # then built once, and every worker inherits it.
    first = work(0, 1)
    if first is None:
        return None
    pieces = workers * SLICES_PER_WORKER
    size = max(-(-(count - 1) // pieces), 1)
    slices = [(start, min(start + size, count)) for start in range(1, count, size)]
    gc.freeze()  # what the workers inherit is never traversed by their collections
    parts = _fan_out(work, slices, workers)
    if parts is None:
        return None
    found = list(first)
    for part in parts:
        found += part
    return found


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _fan_out(work: Callable[[int, int], list[T] | None], slices: Sequence[tuple[int, int]],
             workers: int) -> list[list[T]] | None:
    """Each slice's results, in slice order, decided on `workers` forked children."""
    runs_read, runs_write = os.pipe()
    os.write(runs_write, b"".join(i.to_bytes(_TOKEN, "little") for i in range(len(slices))))
    os.close(runs_write)
    pending: list[tuple[int, int]] = []  # (pid, the pipe its results come down), not yet read
    running: set[int] = set()
    done: dict[int, list[T] | None] = {}
    try:
        for _ in range(workers):
            results_read, results_write = os.pipe()
            try:
                pid = os.fork()
            except OSError:  # out of processes: the caller does it in one
                os.close(results_read)
                os.close(results_write)
                return None
            if pid == 0:
                os.close(results_read)
                _worker(work, slices, runs_read, results_write)
            os.close(results_write)
            pending.append((pid, results_read))
            running.add(pid)
        while pending:  # each sends once, at its end: read in turn, no deadlock
            pid, results = pending.pop(0)
            with os.fdopen(results, "rb") as stream:
                data = stream.read()
            _, status = os.waitpid(pid, 0)
            running.discard(pid)
            sent = pickle.loads(data) if status == 0 and data else None  # noqa: S301 - our child's
            if sent is None or None in sent.values():
                return None  # the others are stopped: the caller does it all in one process
            done.update(sent)
    finally:
        os.close(runs_read)
        _stop(pending, running)
    parts = [done.get(index) for index in range(len(slices))]
    return None if None in parts else [part for part in parts if part is not None]


def _worker(work: Callable[[int, int], list[T] | None], slices: Sequence[tuple[int, int]],
            runs: int, results: int) -> None:
    """A child's life: take run numbers until none is left, send what they gave, leave without
    running the parent's exit handlers or flushing its buffers (exit status 1 on any failure,
    Ctrl-C included: the parent reports it)."""
    code = 1
    try:
        done: dict[int, list[T] | None] = {}
        while token := os.read(runs, _TOKEN):
            index = int.from_bytes(token, "little")
            done[index] = work(*slices[index])
            if done[index] is None:
                break
        with os.fdopen(results, "wb") as stream:
            stream.write(pickle.dumps(done, protocol=pickle.HIGHEST_PROTOCOL))
        code = 0
    except BaseException:  # noqa: BLE001, S110 - nothing may escape a forked child
        pass
    finally:
        os._exit(code)


def _stop(pending: Sequence[tuple[int, int]], running: set[int]) -> None:
    """Children not waited for (the parent was interrupted): their pipes closed, themselves
    stopped and waited for."""
    for _, results in pending:
        with contextlib.suppress(OSError):
            os.close(results)
    for pid in running:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
