"""The names that recognise a ScheduledCapacity, without its models.

`fivespot.api.kinds.scheduled_capacity` describes the kind as pydantic models, and importing them costs a
short command (`fivespot check` of one file) more than the rest of its start-up; code that only
needs to tell a ScheduledCapacity from other objects (the field-governance rule, the offline
checker) reads its names here, and the models' module takes them from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

GROUP: Final = "5spot.finos.org"
SCHEDULED_CAPACITY: Final = "ScheduledCapacity"

CAPI_GROUP: Final = "cluster.x-k8s.io"
MACHINES: Final = "machines"
"""The Cluster API Machines the machine controller creates (the resource, in that group)."""


def cel_string(value: str) -> str:
    """`value` as a single-quoted CEL string literal (a regex's `\\.` must reach CEL as `\\\\.`)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def api_group(api_version: str) -> str:
    """The group part of an apiVersion: `apps/v1` -> `apps`, `v1` -> ``."""
    group, slash, _ = api_version.rpartition("/")
    return group if slash else ""


def is_scheduled_capacity(obj: object) -> bool:
    """Whether a raw object is a ScheduledCapacity (any version)."""
    return (isinstance(obj, Mapping) and obj.get("kind") == SCHEDULED_CAPACITY
            and api_group(str(obj.get("apiVersion"))) == GROUP)
