"""ScheduledCapacity `5spot.finos.org/v1alpha1`: the spec a tenant writes and the status the
capacity controller reports.

These models are the single description of the kind. The compiler turns them into the CRD's
OpenAPI schema (so every string and list carries a bound, which keeps Kubernetes' CEL cost
estimate finite, and the admission-time rules ride along as `x-kubernetes-validations`), and the
capacity controller parses objects with them, so what admission accepts and what the reconciler
expects cannot drift apart.

The field-path rule itself lives in `fivespot.api.fieldpath`; this module only attaches it, as the
schema `pattern` and as a CEL `self.matches(...)` rule built from the same constant.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from pydantic import Field, field_validator

from fivespot.api.fieldpath import (
    CAPACITY_PATH_MESSAGE,
    CAPACITY_PATH_PATTERN,
    DRAINED_PATH_MESSAGE,
    DRAINED_PATH_PATTERN,
    MAX_PATH_LENGTH,
)
from fivespot.api.kinds.base import KindModel
from fivespot.api.kinds.names import GROUP as GROUP
from fivespot.api.kinds.names import SCHEDULED_CAPACITY
from fivespot.api.kinds.names import api_group as api_group
from fivespot.api.kinds.names import cel_string as cel_string

VERSION: Final = "v1alpha1"
KIND: Final = SCHEDULED_CAPACITY
PLURAL: Final = "scheduledcapacities"
SHORT_NAMES: Final = ("scap",)

PROVIDER_GROUP: Final = "spotschedules.5spot.finos.org"

INACTIVE_VALUE: Final = 0
"""The value written when capacity is handed back. Fixed by the ScheduledCapacity contract
(docs/design/contracts/scheduled-capacity.md), deliberately not a field."""

MAX_ACTIVE_VALUE: Final = 2**31 - 1
"""Capacity fields on Kubernetes objects are int32 almost everywhere; a larger value is a typo."""

MAX_CONDITIONS: Final = 16

# Kubernetes naming rules, as RE2-compatible patterns (explicit ASCII classes, no lookaround).
_DNS_LABEL: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_LABEL_PATTERN: Final = rf"^{_DNS_LABEL}$"
DNS_SUBDOMAIN_PATTERN: Final = rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$"
KIND_PATTERN: Final = r"^[A-Z][A-Za-z0-9]*$"
_VERSION: Final = r"v[0-9]+((alpha|beta)[0-9]+)?"
VERSION_PATTERN: Final = rf"^{_VERSION}$"
API_VERSION_PATTERN: Final = rf"^({_DNS_LABEL}(\.{_DNS_LABEL})*/)?{_VERSION}$"
SCHEDULE_API_VERSION_PATTERN: Final = rf"^{re.escape(PROVIDER_GROUP)}/{_VERSION}$"

HANDBACK_TIMEOUT_PATTERN: Final = r"^([0-9]+(\.[0-9]+)?(h|m|s|ms))+$"
"""A Go/Kubernetes duration such as `15m`, `1h30m` or `90s` (no sign, no `us`/`ns`)."""
MIN_HANDBACK_TIMEOUT: Final = "1s"
MAX_HANDBACK_TIMEOUT: Final = "168h"


def _rule(rule: str, message: str) -> dict[str, Any]:
    return {"x-kubernetes-validations": [{"rule": rule, "message": message}]}


CAPACITY_PATH_CEL: Final = f"self.matches({cel_string(CAPACITY_PATH_PATTERN)})"
DRAINED_PATH_CEL: Final = f"self.matches({cel_string(DRAINED_PATH_PATTERN)})"

SCHEDULE_API_VERSION_CEL: Final = f"self.matches({cel_string(SCHEDULE_API_VERSION_PATTERN)})"
SCHEDULE_API_VERSION_MESSAGE: Final = (
    f"must be a version of the provider group {PROVIDER_GROUP}, for example "
    f"{PROVIDER_GROUP}/v1alpha1; a ScheduledCapacity follows only spot-schedule providers"
)

HANDBACK_TIMEOUT_CEL: Final = (
    f"duration(self) >= duration({cel_string(MIN_HANDBACK_TIMEOUT)}) && "
    f"duration(self) <= duration({cel_string(MAX_HANDBACK_TIMEOUT)})"
)
HANDBACK_TIMEOUT_MESSAGE: Final = (
    f"must be a duration such as 15m or 1h30m, between {MIN_HANDBACK_TIMEOUT} and "
    f"{MAX_HANDBACK_TIMEOUT}"
)

_DURATION_PART: Final = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|h|m|s)")
_DURATION_UNIT_SECONDS: Final = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str) -> timedelta:
    """The length of a duration string that matches `HANDBACK_TIMEOUT_PATTERN`.

    Raises ValueError for anything else, so a caller never mistakes garbage for zero.
    """
    if re.fullmatch(HANDBACK_TIMEOUT_PATTERN[1:-1], text) is None:
        raise ValueError(f"{text!r} is not a duration such as 15m or 1h30m")
    seconds = math.fsum(
        float(number) * _DURATION_UNIT_SECONDS[unit]
        for number, unit in _DURATION_PART.findall(text)
    )
    return timedelta(seconds=seconds)


_MIN_TIMEOUT: Final = parse_duration(MIN_HANDBACK_TIMEOUT)
_MAX_TIMEOUT: Final = parse_duration(MAX_HANDBACK_TIMEOUT)


class ScheduleRef(KindModel):
    """A spot-schedule provider object in the ScheduledCapacity's own namespace."""

    api_version: str = Field(
        description=(
            "apiVersion of the provider kind. Providers are resolved by group and kind, so any "
            f"served version of {PROVIDER_GROUP} works."
        ),
        max_length=253,
        pattern=SCHEDULE_API_VERSION_PATTERN,
        json_schema_extra=_rule(SCHEDULE_API_VERSION_CEL, SCHEDULE_API_VERSION_MESSAGE),
    )
    kind: str = Field(
        description="Kind of the provider, for example ManualSchedule.",
        max_length=63,
        pattern=KIND_PATTERN,
    )
    name: str = Field(
        description="Name of the provider object, in the same namespace.",
        max_length=253,
        pattern=DNS_SUBDOMAIN_PATTERN,
    )


class TargetRef(KindModel):
    """The object whose capacity field is gated. It is never created, deleted or owned."""

    api_version: str = Field(
        description="apiVersion of the target, for example pools.example.com/v1.",
        max_length=316,
        pattern=API_VERSION_PATTERN,
    )
    kind: str = Field(
        description="Kind of the target; it must be allowlisted by a CapacityConsumer.",
        max_length=63,
        pattern=KIND_PATTERN,
    )
    name: str = Field(
        description="Name of the target object, in the same namespace.",
        max_length=253,
        pattern=DNS_SUBDOMAIN_PATTERN,
    )

    @property
    def group(self) -> str:
        """The API group of `api_version` ('' for the core group)."""
        return api_group(self.api_version)


class Capacity(KindModel):
    """Which numeric field of the target is gated, and the value it holds while active."""

    path: str = Field(
        description=(
            "Dot-separated path of the numeric field to write, starting with spec., at most "
            "eight camelCase segments (for example spec.warmReplicas). It is written with the "
            "controller's own credential, so metadata., status., indices and wildcards are "
            "inexpressible."
        ),
        max_length=MAX_PATH_LENGTH,
        pattern=CAPACITY_PATH_PATTERN,
        json_schema_extra=_rule(CAPACITY_PATH_CEL, CAPACITY_PATH_MESSAGE),
    )
    active_value: int = Field(
        description=(
            "Value written at path while the schedule is active. The inactive value is fixed "
            "at 0."
        ),
        ge=0,
        le=MAX_ACTIVE_VALUE,
    )


class Handback(KindModel):
    """How to tell that the consumer has drained after the zero write, and how long to wait."""

    drained_path: str = Field(
        description=(
            "Dot-separated path of the target's in-use counter, starting with status. Handback "
            "completes when it reads the number 0; a missing or non-numeric counter is not "
            "drained."
        ),
        max_length=MAX_PATH_LENGTH,
        pattern=DRAINED_PATH_PATTERN,
        json_schema_extra=_rule(DRAINED_PATH_CEL, DRAINED_PATH_MESSAGE),
    )
    timeout: str = Field(
        description=(
            "How long to wait for the counter to reach 0 after the zero write, as a duration "
            "such as 15m or 1h30m. On timeout the value is held at 0 and the object reports "
            "HandbackTimedOut; nothing is forced."
        ),
        max_length=32,
        pattern=HANDBACK_TIMEOUT_PATTERN,
        json_schema_extra=_rule(HANDBACK_TIMEOUT_CEL, HANDBACK_TIMEOUT_MESSAGE),
    )

    @field_validator("timeout")
    @classmethod
    def _timeout_in_bounds(cls, value: str) -> str:
        """The CEL rule's bounds, so the model accepts exactly what the API server admits."""
        if not _MIN_TIMEOUT <= parse_duration(value) <= _MAX_TIMEOUT:
            raise ValueError(HANDBACK_TIMEOUT_MESSAGE)
        return value

    @property
    def timeout_delta(self) -> timedelta:
        """`timeout` as a timedelta."""
        return parse_duration(self.timeout)


class ScheduledCapacitySpec(KindModel):
    """Gate one numeric field on a foreign object by a spot schedule."""

    schedule: ScheduleRef = Field(description="The spot-schedule provider to follow.")
    target_ref: TargetRef = Field(description="The object whose capacity field is gated.")
    capacity: Capacity = Field(description="The gated field and its active value.")
    handback: Handback | None = Field(
        default=None,
        description=(
            "Wait for the consumer to drain after the zero write. Omit it for a consumer with "
            "no in-use counter; handback then completes as soon as the zero write lands."
        ),
    )
    node_name: str | None = Field(
        default=None,
        description=(
            "The node this capacity is carved from. When it matches the nodeRef of any "
            "ScheduledMachine in the namespace, the value is held at 0 and "
            "HostGovernanceConflict is reported."
        ),
        max_length=253,
        pattern=DNS_SUBDOMAIN_PATTERN,
    )
    enabled: bool = Field(
        default=True,
        description=(
            "When false the schedule is ignored and capacity is handed back as if it had "
            "closed (zero write, then the handback wait); phase Disabled."
        ),
    )
    kill_switch: bool = Field(
        default=False,
        description=(
            "When true the value is written to 0 immediately, without waiting for the handback; "
            "phase Terminated. It wins over every other setting."
        ),
    )


class Phase(StrEnum):
    """Where a ScheduledCapacity is in its lifecycle. Its own phases, not ScheduledMachine's."""

    PENDING = "Pending"
    ACTIVE = "Active"
    HANDING_BACK = "HandingBack"
    HANDBACK_TIMED_OUT = "HandbackTimedOut"
    INACTIVE = "Inactive"
    DISABLED = "Disabled"
    TERMINATED = "Terminated"
    ERROR = "Error"


class ConditionStatus(StrEnum):
    """The three values of a Kubernetes condition's status."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


CONDITION_TYPE_PATTERN: Final = r"^[A-Z][A-Za-z0-9]*$"
CONDITION_REASON_PATTERN: Final = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


class Condition(KindModel):
    """One observation, shaped like metav1.Condition."""

    type: str = Field(description="Condition type.", max_length=316, pattern=CONDITION_TYPE_PATTERN)
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(
        description="A CamelCase reason a person can look up and act on.",
        max_length=1024,
        pattern=CONDITION_REASON_PATTERN,
    )
    message: str = Field(description="What happened and what to do about it.", max_length=32768)
    last_transition_time: datetime = Field(
        description="When status last changed (not reason or message)."
    )
    observed_generation: int | None = Field(
        default=None, description="The spec generation this condition was computed from.", ge=0
    )


class ScheduleState(KindModel):
    """The last known answer of the schedule provider, held while it cannot be resolved."""

    active: bool | None = Field(
        default=None,
        description="The provider's status.active when last resolved; unset if never resolved.",
    )
    resolved: bool = Field(
        default=False, description="Whether the most recent lookup resolved the provider."
    )
    last_transition_time: datetime | None = Field(
        default=None, description="When the held active value last changed."
    )


class ContestState(KindModel):
    """Another field manager rewrites the governed field: who, how often fivespot put its value
    back, and when it last did (what the repair backoff is computed from, so a restart loses
    nothing)."""

    manager: str = Field(
        default="",
        description="The field manager that owned the field when it was last found rewritten "
        "(from the target's managedFields); empty when it could not be read.",
        max_length=128,
    )
    repairs: int = Field(
        default=0, ge=0, le=1_000_000,
        description="How many times the controller has put its value back in this contest.",
    )
    last_repair_time: datetime | None = Field(
        default=None, description="When the controller last put its value back."
    )


class ScheduledCapacityStatus(KindModel):
    """What the capacity controller observed and did. All controller state lives here."""

    phase: Phase = Field(default=Phase.PENDING, description="Lifecycle phase.")
    conditions: tuple[Condition, ...] = Field(
        default=(),
        description="Ready, SpotScheduleResolved, TargetResolved, CapacityWritten, "
        "HandbackComplete and HostGovernanceConflict.",
        max_length=MAX_CONDITIONS,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
    )
    written_value: int | None = Field(
        default=None,
        description="The value the controller holds the field at (0 or capacity.activeValue).",
        ge=0,
        le=MAX_ACTIVE_VALUE,
    )
    last_write_time: datetime | None = Field(
        default=None, description="When the controller last patched the target's field."
    )
    observed_drained_value: int | None = Field(
        default=None,
        description="The drain counter at handback.drainedPath when last read, if it was a number.",
    )
    governed_node: str | None = Field(
        default=None,
        description="spec.nodeName while this object governs that node without a conflict.",
        max_length=253,
    )
    handback_start_time: datetime | None = Field(
        default=None, description="When the controller began holding the field at 0."
    )
    handback_deadline: datetime | None = Field(
        default=None,
        description="When an undrained handback times out: the zero write plus handback.timeout.",
    )
    observed_generation: int | None = Field(
        default=None, description="The spec generation this status was computed from.", ge=0
    )
    schedule: ScheduleState | None = Field(
        default=None, description="The last known state of the schedule provider."
    )
    contest: ContestState | None = Field(
        default=None,
        description="Set while another field manager rewrites the governed field "
        "(FieldContested=True): the repair backoff's state.",
    )

    def condition(self, type_: str) -> Condition | None:
        """The condition of that type, if present."""
        return next((c for c in self.conditions if c.type == type_), None)
