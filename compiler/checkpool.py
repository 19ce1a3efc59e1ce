"""Deciding many objects on every core the process may use.

`Checker.check` is pure and CPU-bound, so a large `fivespot check` is split across forked
workers: each inherits the compiled checker and the requests (nothing is re-read or recompiled),
decides a contiguous slice, and sends back the verdicts, which are put back in input order —
the output is the same bytes as a single process's. Small inputs, one usable core, or a platform
without `fork` are decided in this process.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Final

from policies.admission_eval import Checker, NamespaceRequired, Request, Verdict

MIN_PER_WORKER: Final = 500
"""Below this many objects per worker, forking costs more than it saves."""

Outcome = Verdict | NamespaceRequired

_checker: Checker | None = None
_requests: Sequence[Request] = ()


def decide_all(checker: Checker, requests: Sequence[Request], jobs: int | None = None
               ) -> list[Outcome]:
    """The verdict for each request (or the NamespaceRequired it raised), in order. `jobs`:
    how many processes at most (default: the usable cores)."""
    workers = min(jobs or usable_cores(), len(requests) // MIN_PER_WORKER)
    if workers < 2:
        return [_decide(checker, request) for request in requests]
    import multiprocessing  # only where it is used: it costs a short run a tenth of its start-up

    if "fork" not in multiprocessing.get_all_start_methods():
        return [_decide(checker, request) for request in requests]
    # The first is decided here, before forking: what the checker builds on first use (the
    # match plan and the batched program of the policies a request matches) is then built once,
    # and every worker inherits it.
    first = _decide(checker, requests[0])
    global _checker, _requests
    _checker, _requests = checker, requests
    try:
        size = -(-(len(requests) - 1) // workers)
        slices = [(start, min(start + size, len(requests)))
                  for start in range(1, len(requests), size)]
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_decide_slice, slices, chunksize=1)
    finally:
        _checker, _requests = None, ()
    return [first, *(outcome for part in parts for outcome in part)]


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _decide(checker: Checker, request: Request) -> Outcome:
    try:
        return checker.check(request)
    except NamespaceRequired as error:
        return error


def _decide_slice(bounds: tuple[int, int]) -> list[Outcome]:
    assert _checker is not None
    return [_decide(_checker, request) for request in _requests[bounds[0]:bounds[1]]]
