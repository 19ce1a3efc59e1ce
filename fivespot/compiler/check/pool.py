"""Reading and deciding many objects on every core the process may use.

A large `fivespot check` is split across forked workers: the parent finds where each document
of the input starts (cheap whole-text scans), and each worker inherits the compiled checker and
the input's text, then reads, decides and sums up runs of documents — YAML parsing is a third
of the work, so it is shared too — and sends back only the results, which are put back in
input order: the output is the same bytes as a single process's. Small inputs, one usable core,
or a platform without `fork` are done in this process.

The workers are plain `os.fork` children that take run numbers from one pipe and send each
run's results down a pipe of their own as soon as it is done, then leave with `os._exit`:
`multiprocessing.Pool` would do the same after importing its machinery and starting three
threads, about 30 ms, a twentieth of a 2,000-object run. The parent takes in (unpickles and
converts) each run while the workers go on with the others, so that little is left for it to do
once the last one ends. A worker that fails in any way, or a run the fast path cannot handle,
makes the whole answer None, and the caller then does it all in one process.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import select
import signal
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final, TypeVar

MIN_PER_WORKER: Final = 500
"""Below this many documents per worker, forking costs more than it saves."""
SHARE: Final = 3
"""Each run handed out is this many workers' share of what is left (guided scheduling): large
runs first, cheap to hand out, then ever smaller ones, so the workers end together even when
one was slowed by another process on its core (the parent, taking in results, is one)."""
MIN_RUN: Final = 40
"""The smallest run: below it, handing a run out costs more than the balance it buys."""
_TOKEN: Final = 2
"""Bytes of one run number in the runs pipe (a read of that many is atomic among readers)."""

T = TypeVar("T")
U = TypeVar("U")


def run(work: Callable[[int, int], list[T] | None], count: int, jobs: int | None,
        each: Callable[[list[T]], list[U]]) -> list[U] | None:
    """`work(start, end)` (the results for items start..end-1, or None when one of them is not
    what the caller's fast path handles) over range(count), on at most `jobs` processes
    (default: the usable cores), each run's results passed through `each` (in this process, as
    they arrive: while the workers go on) and concatenated in order; None when any part gave
    None or a worker failed."""
    workers = min(jobs or usable_cores(), count // MIN_PER_WORKER)
    if workers < 2 or not hasattr(os, "fork"):
        alone = work(0, count)
        return None if alone is None else each(alone)
    # The first item is done here, before forking: what the checker builds on first use (the
    # schema, the match plan and the batched program of the policies a request matches) is
    # then built once, and every worker inherits it.
    first = work(0, 1)
    if first is None:
        return None
    slices = guided_runs(1, count, workers)
    gc.freeze()  # what the workers inherit is never traversed by their collections
    parts = _fan_out(work, slices, workers, each)
    if parts is None:
        return None
    found = each(first)
    for part in parts:
        found += part
    return found


def guided_runs(start: int, end: int, workers: int) -> list[tuple[int, int]]:
    """start..end cut into runs, each `1 / (SHARE * workers)` of what is left after the runs
    before it (at least MIN_RUN items, the last one what remains)."""
    runs = []
    while start < end:
        size = max(-(-(end - start) // (SHARE * workers)), MIN_RUN)
        runs.append((start, min(start + size, end)))
        start += size
    return runs


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _fan_out(work: Callable[[int, int], list[T] | None], slices: Sequence[tuple[int, int]],
             workers: int, convert: Callable[[list[T]], list[U]]) -> list[list[U]] | None:
    """Each slice's results, converted, in slice order, decided on `workers` forked children."""
    runs_read, runs_write = os.pipe()
    os.write(runs_write, b"".join(i.to_bytes(_TOKEN, "little") for i in range(len(slices))))
    os.close(runs_write)
    streams: dict[int, tuple[int, bytearray]] = {}  # results pipe -> (its worker's pid, unread)
    running: set[int] = set()
    done: dict[int, list[U]] = {}
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
            streams[results_read] = (pid, bytearray())
            running.add(pid)
        while streams:
            ready, _, _ = select.select(list(streams), [], [])
            for results in ready:
                pid, unread = streams[results]
                data = os.read(results, _CHUNK)
                unread += data
                for index, part in _messages(unread):
                    if part is None:
                        return None  # the others are stopped: the caller does it all in one
                    done[index] = convert(part)
                if not data:  # the worker is gone: it must have left well, having said all
                    del streams[results]
                    os.close(results)
                    _, status = os.waitpid(pid, 0)
                    running.discard(pid)
                    if status != 0 or unread:
                        return None
    finally:
        os.close(runs_read)
        _stop(streams, running)
    parts = [done.get(index) for index in range(len(slices))]
    return None if None in parts else [part for part in parts if part is not None]


_HEADER: Final = struct.Struct("<HI")
"""A message down a results pipe: the run number and the length of the pickle that follows."""
_CHUNK: Final = 1 << 20


def _messages(unread: bytearray) -> Iterator[tuple[int, Any]]:
    """The whole messages at the start of `unread`, taken out of it (a partial one is left)."""
    while len(unread) >= _HEADER.size:
        index, length = _HEADER.unpack_from(unread)
        end = _HEADER.size + length
        if len(unread) < end:
            return
        with memoryview(unread) as view:
            part = pickle.loads(view[_HEADER.size:end])  # noqa: S301 - our child's
        del unread[:end]
        yield index, part


def _worker(work: Callable[[int, int], list[T] | None], slices: Sequence[tuple[int, int]],
            runs: int, results: int) -> None:
    """A child's life: take run numbers until none is left, sending each run's results as it is
    done (None when the fast path cannot handle it, and then stop), then leave without running
    the parent's exit handlers or flushing its buffers (exit status 1 on any failure, Ctrl-C
    included: the parent reports it)."""
    code = 1
    try:
        with os.fdopen(results, "wb") as stream:
            while token := os.read(runs, _TOKEN):
                index = int.from_bytes(token, "little")
                found = work(*slices[index])
                data = pickle.dumps(found, protocol=pickle.HIGHEST_PROTOCOL)
                stream.write(_HEADER.pack(index, len(data)))
                stream.write(data)
                stream.flush()
                if found is None:
                    break
        code = 0
    except BaseException:  # noqa: BLE001, S110 - nothing may escape a forked child
        pass
    finally:
        os._exit(code)


def _stop(streams: Mapping[int, tuple[int, bytearray]], running: set[int]) -> None:
    """Children not waited for (the parent was interrupted, or has its answer): their pipes
    closed, themselves stopped and waited for."""
    for results in streams:
        with contextlib.suppress(OSError):
            os.close(results)
    for pid in running:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
