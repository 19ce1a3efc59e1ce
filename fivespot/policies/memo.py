"""The evaluator's bounded memories, one rule for all of them.

The offline checker remembers answers that repeat across the objects of a file: a schema
pattern on an apiVersion, a CRD rule on a duration, a policy batch on a projection, the match
plan of a namespace. Every such memory is a plain dict that, once it holds `LIMIT` entries,
starts over empty: a file of many distinct values costs a bounded amount of memory, and the
values that repeat are back after their next use.
"""

from __future__ import annotations

from typing import Final, TypeVar

LIMIT: Final = 4096
"""Entries a memory keeps before it starts over."""

K = TypeVar("K")
V = TypeVar("V")


def remember(memory: dict[K, V], key: K, value: V) -> V:
    """Keep `value` as the answer for `key` (emptying `memory` first when it is full); returns
    `value`."""
    if len(memory) >= LIMIT:
        memory.clear()
    memory[key] = value
    return value
