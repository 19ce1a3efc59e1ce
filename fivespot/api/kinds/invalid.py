"""A spec the model refused, shared by every controller: an older CRD (or none) admitted an object
the controller's own model rejects, and the controller refuses it with the errors in its status
rather than acting on it. Apart from `fivespot.api.kinds.base`, which `fivespot check` imports on its
one-object path, where a dataclass costs start-up time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class InvalidSpec:
    """A spec that failed the model; `errors` are human-readable."""

    raw: Mapping[str, object] = field(hash=False, compare=True)
    errors: tuple[str, ...]
