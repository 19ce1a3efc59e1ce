"""The field-path rule: which fields of a foreign object a ScheduledCapacity may name
(docs/design/contracts/scheduled-capacity.md; why it is a security control:
docs/design/decisions/0002-the-field-path-rule-is-a-security-control.md).

`spec.capacity.path` is written with the capacity controller's own, broader credential, so an
unconstrained path would be a confused-deputy primitive. The rule is an allowlist: dot-separated
camelCase segments, at most eight, starting with `spec.` (or `status.` for the drain counter).
Indices, wildcards, `..`, quotes and `/` are simply inexpressible.

The same pattern is emitted as the CRD schema `pattern`, as a CRD CEL rule, and used by the
reconciler, which must still refuse a bad path when the installed CRD is older than the controller.
"""

from __future__ import annotations

import functools
import re
from typing import Final

MAX_SEGMENTS: Final = 8
MAX_PATH_LENGTH: Final = 256
_SEGMENT: Final = r"[a-z][a-zA-Z0-9]*"

CAPACITY_PATH_PATTERN: Final = rf"^spec(\.{_SEGMENT}){{1,{MAX_SEGMENTS - 1}}}$"
"""`spec.capacity.path`: `spec.` then one to seven camelCase segments."""

DRAINED_PATH_PATTERN: Final = rf"^status(\.{_SEGMENT}){{1,{MAX_SEGMENTS - 1}}}$"
"""`spec.handback.drainedPath`: `status.` then one to seven camelCase segments."""

CAPACITY_PATH_MESSAGE: Final = (
    "must be dot-separated camelCase segments starting with 'spec.', at most "
    f"{MAX_SEGMENTS} segments (for example spec.warmReplicas); metadata., status., "
    "indices, wildcards, '..', quotes and '/' are not allowed"
)
DRAINED_PATH_MESSAGE: Final = (
    "must be dot-separated camelCase segments starting with 'status.', at most "
    f"{MAX_SEGMENTS} segments (for example status.inUse); indices, wildcards, '..', "
    "quotes and '/' are not allowed"
)

# Python's `re` and RE2 agree on these patterns when matched in full: the classes are explicit
# ASCII ranges and fullmatch sidesteps `$` matching before a trailing newline in `re`.
_CAPACITY_RE: Final = re.compile(CAPACITY_PATH_PATTERN[1:-1])
_DRAINED_RE: Final = re.compile(DRAINED_PATH_PATTERN[1:-1])


def capacity_path_error(path: object) -> str | None:
    """Why `path` may not be used as `spec.capacity.path`, or None when it may."""
    return _path_error(path, _CAPACITY_RE, CAPACITY_PATH_MESSAGE)


def drained_path_error(path: object) -> str | None:
    """Why `path` may not be used as `spec.handback.drainedPath`, or None when it may."""
    return _path_error(path, _DRAINED_RE, DRAINED_PATH_MESSAGE)


def _path_error(path: object, pattern: re.Pattern[str], message: str) -> str | None:
    if not isinstance(path, str):
        return f"{message}; got a {type(path).__name__}, not a string"
    return _string_path_error(path, pattern, message)


@functools.lru_cache(maxsize=256)
def _string_path_error(path: str, pattern: re.Pattern[str], message: str) -> str | None:
    """Remembered: most ScheduledCapacities name one of a few paths (a check of many objects,
    a controller's reconciles)."""
    if len(path) > MAX_PATH_LENGTH:
        return f"{message}; got {len(path)} characters, the limit is {MAX_PATH_LENGTH}"
    if pattern.fullmatch(path) is None:
        return f"{message}; got {path!r}"
    return None


def split_path(path: str) -> tuple[str, ...]:
    """The segments of a path that has already passed its rule."""
    return tuple(path.split("."))
