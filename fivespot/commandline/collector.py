"""The garbage collector's work in a short command, cut to what it needs.

`fivespot check` and `fivespot test` build many objects that live until the process ends (the
compiled checker, the objects read, their verdicts) and almost no cyclic garbage, yet the
collector's default thresholds walk them again and again as they are made, and the
interpreter's shutdown walks all of them once more. For a check of one object that is more
than a fifth of the run. Long-running commands (controllers, the webhook) keep the defaults.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Final

SHORT_RUN_THRESHOLD: Final = 50_000
"""Allocations between two young-generation collections in a short command (default 700)."""


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Within the block, the young generation is collected every SHORT_RUN_THRESHOLD
    allocations; the thresholds before it are restored after it."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], SHORT_RUN_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def spare_the_shutdown() -> None:
    """For a process about to exit: every object it holds is moved out of the collector's sight
    (`gc.freeze`), so the interpreter's shutdown does not walk them all again; they are freed
    with the process as before, and exit handlers and buffered output are unaffected."""
    gc.freeze()
