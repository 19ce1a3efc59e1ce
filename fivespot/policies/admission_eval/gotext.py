"""Values rendered as the API server's Go code renders them in its messages.

A denial is only useful offline if it reads exactly like the cluster's: a user copies it into a
Fixture, a CI log is compared with `kubectl` output. The API server (`SERVER_VERSION`) builds
its messages with Go's `fmt` and `encoding/json`, so a value appears as `%q` (`strconv.Quote`:
printable Unicode kept, everything else escaped as `\\x00`, `\\u00a0`, `\\U0001f600`), `%v`
(numbers in Go's shortest form, `1e+06`), or `json.Marshal` (keys sorted, `<>&` escaped as
`\\u003c`). `error_body` is `field.Error.ErrorBody()` of k8s.io/apimachinery: the text after
`FIELD: ` of one cause. Each function here follows the Go source of that version, line by line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from fivespot.policies.kubeversions import DEFAULT

SERVER_VERSION: Final = DEFAULT.release
"""The kube-apiserver whose Go text these functions follow: the default version of the supported
range (fivespot/policies/kubeversions.py; a unit test keeps each one equal to its wrapper module). Where
another supported version words a message differently, the difference is a field there."""


class _Omit:
    """`field.OmitValueType{}`: the value is left out of the message (objects and arrays)."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT: Final = _Omit()

# field.ErrorType -> its String(); errors of these types never show a value.
_WITHOUT_VALUE: Final = {
    "FieldValueRequired": "Required value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "InternalError": "Internal error",
}
_WITH_VALUE: Final = {
    "FieldValueInvalid": "Invalid value",
    "FieldValueTypeInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueNotFound": "Not found",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueTooMany": "Too many",
}


def error_body(error_type: str, value: Any, detail: str) -> str:
    """`field.Error.ErrorBody()`: `Invalid value: "x": detail`, `Required value`, ..."""
    if error_type in _WITHOUT_VALUE:
        text = _WITHOUT_VALUE[error_type]
    elif error_type in _WITH_VALUE:
        text = _WITH_VALUE[error_type]
        if value is not OMIT:
            text += ": " + bad_value(value)
    else:
        raise ValueError(f"unknown field error type {error_type!r}")
    return f"{text}: {detail}" if detail else text


def bad_value(value: Any) -> str:
    """A field error's BadValue: `%v` for numbers and bools, `%q` for strings, JSON otherwise."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, int) and _is_int64(value):
        return str(value)
    if isinstance(value, (int, float)):
        return format_float(float(value))
    return json_marshal(value)


def _is_int64(value: int) -> bool:
    return -(2**63) <= value < 2**63


def number_v(value: Any) -> str:
    """`%v` of a decoded JSON number (int64, or float64 for fractions and integers past int64)."""
    if isinstance(value, int) and not isinstance(value, bool) and _is_int64(value):
        return str(value)
    return format_float(float(value))


def format_float(value: float) -> str:
    """`%v` of a float64: strconv's shortest 'g' form, an exponent from 1e+06 up and below 1e-04."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    digits, exponent = _shortest(value)
    if exponent < -4 or exponent >= 6:
        return _exponent_form(value, digits, exponent)
    return _plain_form(value, digits, exponent)


def _shortest(value: float) -> tuple[str, int]:
    """The shortest round-tripping decimal digits of |value| and its decimal exponent."""
    mantissa, _, exp = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    fraction = fraction.rstrip("0") if fraction != "0" else ""
    digits = (whole + fraction).lstrip("0")
    leading = len(whole + fraction) - len((whole + fraction).lstrip("0"))
    exponent = len(whole) - 1 - leading + (int(exp) if exp else 0)
    return digits.rstrip("0") or "0", exponent


def _exponent_form(value: float, digits: str, exponent: int) -> str:
    sign = "-" if value < 0 else ""
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"


def _plain_form(value: float, digits: str, exponent: int) -> str:
    sign = "-" if value < 0 else ""
    if exponent < 0:
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    if len(digits) <= exponent + 1:
        return sign + digits + "0" * (exponent + 1 - len(digits))
    return f"{sign}{digits[:exponent + 1]}.{digits[exponent + 1:]}"


_SHORT_ESCAPES: Final = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                         "\t": "\\t", "\v": "\\v", "\\": "\\\\", '"': '\\"'}


def quote(text: str) -> str:
    """`strconv.Quote`: printable runes as they are; others as \\a..\\v, \\xNN, \\uNNNN, \\UNNNNNNNN."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    out = ['"']
    for char in text:
        escaped = _SHORT_ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif char == " " or (char.isprintable() and not 0xD800 <= ord(char) <= 0xDFFF):
            out.append(char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02x}")
        elif 0xDC80 <= ord(char) <= 0xDCFF:  # an undecodable byte, as surrogateescape keeps it
            out.append(f"\\x{ord(char) - 0xDC00:02x}")
        elif 0xD800 <= ord(char) <= 0xDFFF:
            out.append("\\ufffd")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    out.append('"')
    return "".join(out)


_JSON_ESCAPES: Final = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                        "\b": "\\b", "\f": "\\f", "<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                        "\u2028": "\\u2028", "\u2029": "\\u2029"}


def json_string(text: str) -> str:
    """A string as `encoding/json` writes it (HTML-safe: `<`, `>`, `&` escaped)."""
    out = ['"']
    for char in text:
        escaped = _JSON_ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif ord(char) < 0x20:
            out.append(f"\\u{ord(char):04x}")
        elif 0xD800 <= ord(char) <= 0xDFFF:
            out.append("\\ufffd")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def json_number(value: int | float) -> str:
    """A number as `encoding/json` writes a decoded int64 or float64."""
    if isinstance(value, int) and _is_int64(value):
        return str(value)
    number = float(value)
    if number == 0:
        return "-0" if math.copysign(1.0, number) < 0 else "0"
    digits, exponent = _shortest(number)
    if abs(number) < 1e-6 or abs(number) >= 1e21:
        sign = "-" if number < 0 else ""
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent)}"
    return _plain_form(number, digits, exponent)


def json_marshal(value: Any) -> str:
    """`json.Marshal` of a decoded JSON value (objects with sorted keys, no spaces)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json_number(value)
    if isinstance(value, str):
        return json_string(value)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{json_string(str(k))}:{json_marshal(value[k])}"
                              for k in sorted(value, key=lambda k: str(k).encode())) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(json_marshal(item) for item in value) + "]"
    return json_string(str(value))


def aggregate(messages: list[str]) -> str:
    """`utilerrors.NewAggregate(...).Error()` of `field.ErrorList.ToAggregate()`: duplicates
    dropped, one message bare, several as `[a, b]`."""
    unique = list(dict.fromkeys(messages))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"
