"""OpenAPI `format` values as the API server checks them, and as its CEL environment types them.

The API server validates a handful of string formats in a CRD schema (a bad `format: date` is a
422, not a string), and its CEL environment hands such fields to rules as typed values: `date` and
`date-time` are timestamps, `duration` a duration, `byte` bytes. Both behaviours live here so the
offline checker's verdicts and its rules' inputs match the cluster's.

Formats the API server accepts without checking (and any we do not model) pass unchecked.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
from collections.abc import Callable
from typing import Final

from fivespot.policies.admission_eval.regex import Pattern

# kube-openapi's strfmt checks (pkg/validation/strfmt: IsDate, IsDateTime), as they are written:
# a date is Go's time.Parse("2006-01-02"); a date-time is lower-cased and split on "t", the part
# before the first "t" a date and the part after it (up to a second "t", if any) the clock below,
# whose fraction follows any one character and whose offset needs its colon.
_DATE: Final = Pattern(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_DATE_TIME_CLOCK: Final = Pattern(
    r"^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$"
)
_DURATION: Final = Pattern(
    r"^(?:[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|ms|s|m|h))+$|^0$"
)
_HOSTNAME_LABEL: Final = Pattern(r"^[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?$")
_ASCII_LOWER: Final = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
"""Go's strings.ToLower changes more than ASCII, but only "t" and "z" matter to the check, and
only their upper-case forms lower to them; any other character keeps its place (one rune)."""


def _valid_date(text: str) -> bool:
    """Go's calendar: any year 0000-9999 (0 is a leap year, as 400 divides it), a month 01-12,
    a day of that month."""
    if not _DATE.search(text):
        return False
    year, month, day = int(text[0:4]), int(text[5:7]), int(text[8:10])
    if not 1 <= month <= 12:
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1]
    return 1 <= day <= days


def _valid_date_time(text: str) -> bool:
    if len(text.encode("utf-8", "surrogatepass")) < 4:
        return False
    parts = text.translate(_ASCII_LOWER).split("t")
    return len(parts) >= 2 and _valid_date(parts[0]) and _DATE_TIME_CLOCK.search(parts[1])


def _valid_byte(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _valid_uuid(text: str) -> bool:
    import uuid  # imports platform and more: paid only by schemas that use the format

    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return len(text) in (32, 36)


def _valid_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def _valid_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def _valid_cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return "/" in text


def _valid_hostname(text: str) -> bool:
    if not text or len(text) > 255:
        return False
    return all(_HOSTNAME_LABEL.search(label) for label in text.rstrip(".").split("."))


CHECKS: Final[dict[str, Callable[[str], bool]]] = {
    "date": _valid_date,
    "datetime": _valid_date_time,
    "duration": lambda text: bool(_DURATION.search(text)),
    "byte": _valid_byte,
    "uuid": _valid_uuid,
    "ipv4": _valid_ipv4,
    "ipv6": _valid_ipv6,
    "cidr": _valid_cidr,
    "hostname": _valid_hostname,
}
"""Format name (normalised) -> whether a string is valid in it."""


def normalise(name: str) -> str:
    """strfmt's registry ignores case, dashes and underscores: `date-time` is `datetime`."""
    return name.lower().replace("-", "").replace("_", "")


def checker(name: str | None) -> Callable[[str], bool] | None:
    """The validity check for a schema's `format`, or None when the API server checks nothing."""
    if not name:
        return None
    return CHECKS.get(normalise(name))


def cel_conversion(name: str | None) -> str | None:
    """A CEL template (`{v}` is the value) that turns the JSON string into the typed CEL value
    the API server's CRD environment binds for this format, or None when it stays a string."""
    key = normalise(name) if name else ""
    if key == "date":
        return "timestamp({v} + 'T00:00:00Z')"
    if key == "datetime":
        return "timestamp({v})"
    if key == "duration":
        return "duration({v})"
    if key == "byte":
        return "base64.decode({v})"
    return None
