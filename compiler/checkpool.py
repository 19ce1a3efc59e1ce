"""Reading and deciding many objects on every core the process may use.

A large `fivespot check` is split across forked workers: the parent finds where each document
of the input starts (cheap whole-text scans), and each worker inherits the compiled checker and
the input's text, then reads, decides and sums up a contiguous run of documents — YAML parsing
is a third of the work, so it is shared too — and sends back only the results, which are put
back in input order: the output is the same bytes as a single process's. Small inputs, one
usable core, or a platform without `fork` are done in this process.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Final, TypeVar

MIN_PER_WORKER: Final = 500
"""Below this many documents per worker, forking costs more than it saves."""
SLICES_PER_WORKER: Final = 4
"""Runs of documents handed out per worker: more than one, so a worker slowed by another
process on its core does not hold up the others."""

T = TypeVar("T")

_work: Callable[[int, int], list[Any] | None] | None = None


def run(work: Callable[[int, int], list[T] | None], count: int, jobs: int | None = None
        ) -> list[T] | None:
    """`work(start, end)` (the results for items start..end-1, or None when one of them is not
    what the caller's fast path handles) over range(count), on at most `jobs` processes
    (default: the usable cores), the results concatenated in order; None when any part gave
    None."""
    workers = min(jobs or usable_cores(), count // MIN_PER_WORKER)
    if workers < 2:
        return work(0, count)
    import multiprocessing  # only where it is used: it costs a short run a tenth of its start-up

    if "fork" not in multiprocessing.get_all_start_methods():
        return work(0, count)
    # The first item is done here, before forking: what the checker builds on first use (the
    # match plan and the batched program of the policies a request matches) is then built once,
    # and every worker inherits it.
    first = work(0, 1)
    if first is None:
        return None
    global _work
    _work = work
    import gc
    gc.freeze()
    try:
        pieces = workers * SLICES_PER_WORKER
        size = max(-(-(count - 1) // pieces), 1)
        slices = [(start, min(start + size, count)) for start in range(1, count, size)]
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_run_slice, slices, chunksize=1)
    finally:
        _work = None
    found = list(first)
    for part in parts:
        if part is None:
            return None
        found += part
    return found


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _run_slice(bounds: tuple[int, int]) -> list[Any] | None:
    assert _work is not None
    return _work(*bounds)
