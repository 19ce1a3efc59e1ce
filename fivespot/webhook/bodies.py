"""How big a body each check may receive, and how requests are named in metrics.

Each path gets the limits its check needs, so the costliest body an unauthenticated caller can
make the webhook parse is what the largest legitimate review of that check costs, not 7 MiB of
anything everywhere (docs/design/decisions/0023-webhook-authentication-and-limits.md). A limit
is a size and a count of JSON values (`fivespot.webhook.connections.BodyLimit`): parsing costs per value,
and a hostile body packs one into every two or three bytes, where a Kubernetes object has one in
ten or more and the values' budget below is many times any real review's.

- **ScheduledCapacity checks** (host governance, field governance, the polyfill): the object is
  bounded by its schema — at most ~0.6 MiB, 16 conditions of 32 KiB messages being the bulk —
  and an UPDATE's review carries it twice (object and oldObject) plus the request's own fields:
  `SCAP_REVIEW_BYTES`, 2 MiB; `SCAP_REVIEW_VALUES` allows 256 KiB of annotations made of
  commas, twice, and every other field besides.
- **The target guard** sees the capacity controller's writes to consumer objects: a Deployment,
  a VirtualMachinePool, any kind a platform declares. fivespot does not bound those; the API
  server does (a request body of at most 3 MiB), and an UPDATE's review carries two of them:
  `CONSUMER_REVIEW_BYTES`, 7 MiB, the connection layer's overall ceiling, with a million
  values. Refusing a real one would refuse the capacity controller's write (the guard always
  fails closed), so the guard keeps the ceiling, and the connection layer's bounded admission
  of large bodies keeps a flood of them from delaying small reviews.
- **Anything else** (an unknown check, a probe, a mistyped path): no body is needed to answer a
  404 or a probe, `OTHER_BYTES`.

Metric labels come from closed sets only: a label taken from the URL would let a client create a
new time series with every request (security review F5).
"""

from __future__ import annotations

from typing import Final

from fivespot.webhook.connections import MAX_BODY_BYTES, BodyLimit
from fivespot.webhook.review import (
    CHECKS,
    FIELD_GOVERNANCE,
    HOST_GOVERNANCE,
    TARGET_GUARD,
    VAP_POLYFILL,
)

MIB: Final = 1024 * 1024
SCAP_REVIEW_BYTES: Final = 2 * MIB
SCAP_REVIEW_VALUES: Final = 600_000
CONSUMER_REVIEW_BYTES: Final = MAX_BODY_BYTES
CONSUMER_REVIEW_VALUES: Final = 1_000_000
OTHER_BYTES: Final = 64 * 1024
VALIDATE_PREFIX: Final = "/validate/"
UNKNOWN_CHECK: Final = "unknown"
"""The check label of a path that names no check."""

BODY_LIMITS: Final = {
    HOST_GOVERNANCE: BodyLimit(SCAP_REVIEW_BYTES, SCAP_REVIEW_VALUES),
    FIELD_GOVERNANCE: BodyLimit(SCAP_REVIEW_BYTES, SCAP_REVIEW_VALUES),
    VAP_POLYFILL: BodyLimit(SCAP_REVIEW_BYTES, SCAP_REVIEW_VALUES),
    TARGET_GUARD: BodyLimit(CONSUMER_REVIEW_BYTES, CONSUMER_REVIEW_VALUES),
}
assert set(BODY_LIMITS) == set(CHECKS)

OTHER: Final = BodyLimit(OTHER_BYTES, OTHER_BYTES)


def check_of(path: str) -> str | None:
    """The check a request path names (`/validate/<check>`), or None."""
    if not path.startswith(VALIDATE_PREFIX):
        return None
    name = path[len(VALIDATE_PREFIX):]
    return name if name in BODY_LIMITS else None


WAITS_ON_THE_API_SERVER: Final = frozenset({FIELD_GOVERNANCE})
"""The checks that may read the API server while deciding (field governance: the namespace's
autoscalers, and a rival before a denial): served off the event loop
(`fivespot.webhook.connections.WSGIGateway.waits`)."""


def waits(path: str) -> bool:
    """Whether the check at `path` may wait on the API server."""
    return check_of(path) in WAITS_ON_THE_API_SERVER


def body_limit(path: str) -> BodyLimit:
    """What a request to `path` may send."""
    check = check_of(path)
    return BODY_LIMITS[check] if check is not None else OTHER


def check_label(path: str) -> str:
    """The `check` metric label of a request to `path`: a known check's name, else "unknown"."""
    return check_of(path) or UNKNOWN_CHECK
