"""The Kubernetes CEL function library, added to cel-expr-python as one extension.

Kubernetes rules may call functions stock CEL lacks: the Lists library (`isSorted`, `sum`, `min`,
`max`, `indexOf`, `lastIndexOf`), Regex (`find`, `findAll`), URLs, IP/CIDR, Quantity, and (in
admission policies) Authz, whose offline meaning is `fivespot.policies.cel.authz`'s. Rules
written by users for their own CRDs use them, and the offline checker must evaluate those rules
as the API server would, so each function follows the Kubernetes implementation
(`k8s.io/apiserver/pkg/cel/library`) and its Go-library semantics.

cel-expr-python can only call Python for these (about 30 µs a call; they are rare in rules) and
cannot carry opaque values, so URL, IP, CIDR and Quantity values are CEL maps tagged with their
kind; equality of two such values therefore compares their canonical forms, as Kubernetes does.
Regex functions need RE2 semantics; they use `google-re2` and fail loudly without it, never
falling back to Python's `re`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any, Final
from urllib.parse import parse_qsl, quote

from cel_expr_python import cel

from fivespot.policies.cel import authz

try:  # pragma: no cover - exercised only where google-re2 is missing
    import re2
except ImportError:  # pragma: no cover
    re2 = None

TAG: Final = "@kubernetes"
_INT64_MAX: Final = 2**63 - 1
_INT64_MIN: Final = -(2**63)

_Impl = Callable[..., object]
_MAP: Final = cel.Type.MAP
_LIST: Final = cel.Type.LIST
_STRING: Final = cel.Type.STRING
_BOOL: Final = cel.Type.BOOL
_INT: Final = cel.Type.INT
_DYN: Final = cel.Type.DYN
_DOUBLE: Final = cel.Type.DOUBLE


class LibraryError(ValueError):
    """Raised inside a library function; cel-expr-python turns it into a CEL error value."""


def extension(*, admission: bool = False) -> cel.CelExtension:
    """The library as a cel-expr-python extension (register it after `strings`); with
    `admission`, Authz too, which the API server offers admission policies alone."""
    decls: dict[str, list[cel.Overload]] = {}
    for name, overload_id, result, params, member, impl in _OVERLOADS + (
            _AUTHZ if admission else ()):
        overload = cel.Overload(overload_id, result, list(params), is_member=member, impl=impl)
        decls.setdefault(name, []).append(overload)
    return cel.CelExtension(
        "kubernetes", [cel.FunctionDecl(name, overloads) for name, overloads in decls.items()]
    )


def as_text(value: dict[Any, Any]) -> str | None:
    """The canonical text of a tagged library value (URL, IP, CIDR, Quantity), else None."""
    if value.get(TAG) in {"net.IP", "net.CIDR", "kubernetes.URL", "kubernetes.Quantity"}:
        return str(value["text"])
    return None


# --- CEL value semantics in Python -------------------------------------------------------------


def cel_equal(left: object, right: object) -> bool:
    """CEL's heterogeneous equality: numbers compare across types, bools only with bools."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, (int, float)) and isinstance(right, (int, float)):
        return left == right
    if isinstance(left, (bytes, bytearray)) and isinstance(right, (bytes, bytearray)):
        return bytes(left) == bytes(right)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(cel_equal, left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(cel_equal(left[k], right[k]) for k in left)
    return type(left) is type(right) and left == right


def _ordering_kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    for kind in (str, bytes, bytearray, timedelta, datetime):
        if isinstance(value, kind):
            return kind.__name__.replace("bytearray", "bytes")
    raise LibraryError(f"no such overload: values of type {type(value).__name__} are not ordered")


def _comparable(items: Sequence[object]) -> None:
    kinds = {_ordering_kind(item) for item in items}
    if len(kinds) > 1:
        raise LibraryError("no such overload: list elements of mixed types are not ordered")


# --- Lists -------------------------------------------------------------------------------------


def _is_sorted(items: list[Any]) -> bool:
    _comparable(items)
    return all(items[i] <= items[i + 1] for i in range(len(items) - 1))


def _sum(items: list[Any]) -> object:
    if not items:
        return 0
    _comparable(items)
    if any(isinstance(item, bool) for item in items):
        raise LibraryError("no such overload: sum() of bool")
    if all(isinstance(item, timedelta) for item in items):
        return sum(items, timedelta())
    if {type(item) for item in items} not in ({int}, {float}):
        raise LibraryError("no such overload: sum() of mixed int and double")
    total = sum(items)
    if isinstance(total, int) and not _INT64_MIN <= total <= _INT64_MAX:
        raise LibraryError("integer overflow")
    return total


def _extreme(name: str, pick: Callable[[list[Any]], object]) -> _Impl:
    def impl(items: list[Any]) -> object:
        if not items:
            raise LibraryError(f"{name} called on empty list")
        _comparable(items)
        return pick(items)

    return impl


def _index_of(items: list[Any], value: object) -> int:
    return next((i for i, item in enumerate(items) if cel_equal(item, value)), -1)


def _last_index_of(items: list[Any], value: object) -> int:
    for i in range(len(items) - 1, -1, -1):
        if cel_equal(items[i], value):
            return i
    return -1


# --- Regex -------------------------------------------------------------------------------------


def _compiled_pattern(pattern: str) -> Any:
    if re2 is None:  # pragma: no cover
        raise LibraryError("find() and findAll() need the google-re2 package (RE2 semantics)")
    try:
        return re2.compile(pattern)
    except re2.error as error:
        raise LibraryError(f"error parsing regexp: {error}") from None


def _find(text: str, pattern: str) -> str:
    match = _compiled_pattern(pattern).search(text)
    return "" if match is None else str(match.group(0))


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    found: list[str] = []
    for match in _compiled_pattern(pattern).finditer(text):
        found.append(str(match.group(0)))
        if 0 < limit == len(found):
            break
    return found


# --- URLs (Go's net/url ParseRequestURI) ---------------------------------------------------------

_SCHEME: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):(.*)$", re.DOTALL)
_PORT: Final = re.compile(r"^[0-9]*$")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_URL_KIND: Final = "kubernetes.URL"


def _parse_url(text: str) -> dict[str, object]:
    if _CONTROL.search(text):
        raise LibraryError(f"URL parse error during conversion from string: parse {text!r}: "
                           "net/url: invalid control character in URL")
    scheme, rest = "", text
    match = _SCHEME.match(text)
    if match:
        scheme, rest = match.group(1).lower(), match.group(2)
    rest, _, query = rest.partition("?")
    if not rest.startswith("/"):
        if not scheme:
            raise LibraryError(
                f"URL parse error during conversion from string: parse {text!r}: "
                "invalid URI for request"
            )
        return _url_value(text, scheme, "", "", query, opaque=True)
    host = ""
    path = rest
    if scheme and rest.startswith("//"):
        authority, slash, tail = rest[2:].partition("/")
        path = slash + tail
        host = _validated_host(text, authority.rpartition("@")[2])
    return _url_value(text, scheme, host, path, query, opaque=False)


def _validated_host(text: str, host: str) -> str:
    port = ""
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            raise LibraryError(f"URL parse error during conversion from string: parse {text!r}: "
                               "missing ']' in host")
        port = host[end + 1 :]
        if port and not port.startswith(":"):
            raise LibraryError(f"URL parse error during conversion from string: parse {text!r}: "
                               f"invalid port {port!r} after host")
    elif ":" in host:
        port = host[host.rfind(":") :]
    if port and not _PORT.match(port[1:]):
        raise LibraryError(f"URL parse error during conversion from string: parse {text!r}: "
                           f"invalid port {port!r} after host")
    return host


def _url_value(
    text: str, scheme: str, host: str, path: str, query: str, *, opaque: bool
) -> dict[str, object]:
    hostname, port = _split_host_port(host)
    return {
        TAG: _URL_KIND,
        "text": text,
        "scheme": scheme,
        "host": host,
        "hostname": hostname,
        "port": port,
        "path": "" if opaque else quote(path, safe="/!$&'()*+,;=:@%-._~"),
        "query": query,
    }


def _split_host_port(host: str) -> tuple[str, str]:
    if host.startswith("["):
        end = host.find("]")
        return host[1:end], host[end + 2 :] if host[end + 1 : end + 2] == ":" else ""
    name, colon, port = host.rpartition(":")
    return (name, port) if colon else (host, "")


def _is_url(text: str) -> bool:
    try:
        _parse_url(text)
    except LibraryError:
        return False
    return True


def _url_part(part: str) -> _Impl:
    def impl(value: dict[str, Any]) -> object:
        return _expect(value, _URL_KIND)[part]

    return impl


def _url_query(value: dict[str, Any]) -> dict[str, list[str]]:
    query: dict[str, list[str]] = {}
    for key, item in parse_qsl(_expect(value, _URL_KIND)["query"], keep_blank_values=True,
                               separator="&"):
        query.setdefault(key, []).append(item)
    return query


# --- IP and CIDR (Go's net/netip, with Kubernetes' refusals) ------------------------------------

_IP_KIND: Final = "net.IP"
_CIDR_KIND: Final = "net.CIDR"
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _parse_ip(text: str) -> _Address:
    if "%" in text:
        raise LibraryError("IP address with zone value is not allowed")
    try:
        address = ipaddress.ip_address(text)
    except ValueError as error:
        raise LibraryError(f"IP Address {text!r} parse error during conversion from string: "
                           f"{error}") from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise LibraryError("IPv4-mapped IPv6 address is not allowed")
    return address


def _ip_value(address: _Address) -> dict[str, object]:
    return {TAG: _IP_KIND, "text": str(address)}


def _ip(text: str) -> dict[str, object]:
    return _ip_value(_parse_ip(text))


def _is_ip(text: str) -> bool:
    try:
        _parse_ip(text)
    except LibraryError:
        return False
    return True


def _ip_is_canonical(text: str) -> bool:
    return str(_parse_ip(text)) == text


def _address(value: dict[str, Any]) -> _Address:
    return ipaddress.ip_address(_expect(value, _IP_KIND)["text"])


def _ip_predicate(test: Callable[[_Address], bool]) -> _Impl:
    return lambda value: test(_address(value))


def _is_global_unicast(address: _Address) -> bool:
    # Go's IsGlobalUnicast: not unspecified, loopback, multicast, link-local or broadcast.
    return not (
        address.is_unspecified
        or address.is_loopback
        or address.is_multicast
        or address.is_link_local
        or str(address) == "255.255.255.255"
    )


def _is_link_local_multicast(address: _Address) -> bool:
    if isinstance(address, ipaddress.IPv4Address):
        return address in ipaddress.ip_network("224.0.0.0/24")
    return address in ipaddress.ip_network("ff02::/16")


_Interface = ipaddress.IPv4Interface | ipaddress.IPv6Interface


def _parse_cidr(text: str) -> _Interface:
    address_text, slash, bits = text.partition("/")
    if not slash or not bits.isdigit() or (len(bits) > 1 and bits[0] == "0"):
        raise LibraryError(f"network address parse error during conversion from string: "
                           f"netip.ParsePrefix({text!r}): bad bits after slash")
    address = _parse_ip(address_text)
    if int(bits) > address.max_prefixlen:
        raise LibraryError(f"network address parse error during conversion from string: "
                           f"netip.ParsePrefix({text!r}): prefix length out of range")
    return ipaddress.ip_interface(f"{address}/{int(bits)}")


def _cidr_value(interface: _Interface) -> dict[str, object]:
    return {TAG: _CIDR_KIND, "text": f"{interface.ip}/{interface.network.prefixlen}"}


def _cidr(text: str) -> dict[str, object]:
    return _cidr_value(_parse_cidr(text))


def _is_cidr(text: str) -> bool:
    try:
        _parse_cidr(text)
    except LibraryError:
        return False
    return True


def _interface(value: dict[str, Any]) -> _Interface:
    return ipaddress.ip_interface(_expect(value, _CIDR_KIND)["text"])


def _contains_ip(cidr: dict[str, Any], other: object) -> bool:
    address = _parse_ip(other) if isinstance(other, str) else _address(_as_map(other))
    network = _interface(cidr).network
    return address.version == network.version and address in network


def _contains_cidr(cidr: dict[str, Any], other: object) -> bool:
    inner = _parse_cidr(other) if isinstance(other, str) else _interface(_as_map(other))
    outer = _interface(cidr).network
    return inner.version == outer.version and inner.network.subnet_of(outer)  # type: ignore[arg-type]


def _cidr_ip(value: dict[str, Any]) -> dict[str, object]:
    return _ip_value(_interface(value).ip)


def _cidr_masked(value: dict[str, Any]) -> dict[str, object]:
    network = _interface(value).network
    return {TAG: _CIDR_KIND, "text": str(network)}


def _cidr_prefix_length(value: dict[str, Any]) -> int:
    return _interface(value).network.prefixlen


# --- Quantity (k8s.io/apimachinery resource.Quantity) -------------------------------------------

_QUANTITY_KIND: Final = "kubernetes.Quantity"
_QUANTITY: Final = re.compile(r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))([eEinumkKMGTP]*[-+]?[0-9]*)$")
_QUANTITY_ERROR: Final = (
    "quantities must match the regular expression "
    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
_BINARY: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL: Final = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15,
                   "E": 18}
_EXPONENT: Final = re.compile(r"^[eE][-+]?[0-9]+$")


def _parse_quantity(text: str) -> Fraction:
    match = _QUANTITY.match(text)
    if match is None:
        raise LibraryError(_QUANTITY_ERROR)
    number, suffix = Fraction(match.group(1)), match.group(2)
    if suffix in _BINARY:
        return number * (1 << _BINARY[suffix])
    if suffix in _DECIMAL:
        return number * _power_of_ten(_DECIMAL[suffix])
    if _EXPONENT.match(suffix):
        return number * _power_of_ten(int(suffix[1:]))
    raise LibraryError("unable to parse quantity's suffix")


def _power_of_ten(exponent: int) -> Fraction:
    return Fraction(10**exponent) if exponent >= 0 else Fraction(1, 10**-exponent)


def _quantity_value(amount: Fraction) -> dict[str, object]:
    return {TAG: _QUANTITY_KIND, "text": _fraction_text(amount)}


def _fraction_text(amount: Fraction) -> str:
    if amount.denominator == 1:
        return str(amount.numerator)
    nanos = amount * 10**9
    whole = -((-nanos.numerator) // nanos.denominator)  # Kubernetes rounds up to whole nanos
    return f"{whole}n"


def _quantity(text: str) -> dict[str, object]:
    return _quantity_value(_parse_quantity(text))


def _is_quantity(text: str) -> bool:
    try:
        _parse_quantity(text)
    except LibraryError:
        return False
    return True


def _amount(value: object) -> Fraction:
    if isinstance(value, bool):
        raise LibraryError("no such overload")
    if isinstance(value, int):
        return Fraction(value)
    return _parse_quantity(str(_expect(_as_map(value), _QUANTITY_KIND)["text"]))


def _as_integer(value: dict[str, Any]) -> int:
    amount = _amount(value)
    if amount.denominator != 1 or not _INT64_MIN <= amount.numerator <= _INT64_MAX:
        raise LibraryError("cannot convert value to integer")
    return amount.numerator


def _is_integer(value: dict[str, Any]) -> bool:
    amount = _amount(value)
    return amount.denominator == 1 and _INT64_MIN <= amount.numerator <= _INT64_MAX


def _sign(value: dict[str, Any]) -> int:
    amount = _amount(value)
    return (amount > 0) - (amount < 0)


def _compare(left: dict[str, Any], right: object) -> int:
    a, b = _amount(left), _amount(right)
    return (a > b) - (a < b)


# --- shared helpers ----------------------------------------------------------------------------


def _as_map(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise LibraryError("no such overload")
    return value


def _expect(value: dict[str, Any], kind: str) -> dict[str, Any]:
    if value.get(TAG) != kind:
        raise LibraryError(f"no such overload: expected a {kind}")
    return value


def _to_string(value: dict[str, Any]) -> str:
    text = as_text(value)
    if text is None or value.get(TAG) == _QUANTITY_KIND or value.get(TAG) == _URL_KIND:
        raise LibraryError("no such overload: string() of this map")
    return text


_OverloadSpec = tuple[str, str, cel.Type, tuple[cel.Type, ...], bool, _Impl]

_OVERLOADS: Final[tuple[_OverloadSpec, ...]] = (
    # Lists
    ("isSorted", "k8s_list_is_sorted", _BOOL, (_LIST,), True, _is_sorted),
    ("sum", "k8s_list_sum", _DYN, (_LIST,), True, _sum),
    ("min", "k8s_list_min", _DYN, (_LIST,), True, _extreme("min", min)),
    ("max", "k8s_list_max", _DYN, (_LIST,), True, _extreme("max", max)),
    ("indexOf", "k8s_list_index_of", _INT, (_LIST, _DYN), True, _index_of),
    ("lastIndexOf", "k8s_list_last_index_of", _INT, (_LIST, _DYN), True, _last_index_of),
    # Regex
    ("find", "k8s_string_find", _STRING, (_STRING, _STRING), True, _find),
    ("findAll", "k8s_string_find_all", _LIST, (_STRING, _STRING), True, _find_all),
    ("findAll", "k8s_string_find_all_n", _LIST, (_STRING, _STRING, _INT), True, _find_all),
    # URLs
    ("url", "k8s_string_to_url", _MAP, (_STRING,), False, _parse_url),
    ("isURL", "k8s_is_url_string", _BOOL, (_STRING,), False, _is_url),
    ("getScheme", "k8s_url_get_scheme", _STRING, (_MAP,), True, _url_part("scheme")),
    ("getHost", "k8s_url_get_host", _STRING, (_MAP,), True, _url_part("host")),
    ("getHostname", "k8s_url_get_hostname", _STRING, (_MAP,), True, _url_part("hostname")),
    ("getPort", "k8s_url_get_port", _STRING, (_MAP,), True, _url_part("port")),
    ("getEscapedPath", "k8s_url_get_escaped_path", _STRING, (_MAP,), True, _url_part("path")),
    ("getQuery", "k8s_url_get_query", _MAP, (_MAP,), True, _url_query),
    # IP
    ("ip", "k8s_string_to_ip", _MAP, (_STRING,), False, _ip),
    ("isIP", "k8s_is_ip", _BOOL, (_STRING,), False, _is_ip),
    ("ip.isCanonical", "k8s_ip_is_canonical", _BOOL, (_STRING,), False, _ip_is_canonical),
    ("family", "k8s_ip_family", _INT, (_MAP,), True, lambda v: _address(v).version),
    ("isUnspecified", "k8s_ip_is_unspecified", _BOOL, (_MAP,), True,
     _ip_predicate(lambda a: a.is_unspecified)),
    ("isLoopback", "k8s_ip_is_loopback", _BOOL, (_MAP,), True,
     _ip_predicate(lambda a: a.is_loopback)),
    ("isLinkLocalMulticast", "k8s_ip_is_link_local_multicast", _BOOL, (_MAP,), True,
     _ip_predicate(_is_link_local_multicast)),
    ("isLinkLocalUnicast", "k8s_ip_is_link_local_unicast", _BOOL, (_MAP,), True,
     _ip_predicate(lambda a: a.is_link_local and not a.is_multicast)),
    ("isGlobalUnicast", "k8s_ip_is_global_unicast", _BOOL, (_MAP,), True,
     _ip_predicate(_is_global_unicast)),
    # CIDR
    ("cidr", "k8s_string_to_cidr", _MAP, (_STRING,), False, _cidr),
    ("isCIDR", "k8s_is_cidr", _BOOL, (_STRING,), False, _is_cidr),
    ("containsIP", "k8s_cidr_contains_ip", _BOOL, (_MAP, _DYN), True, _contains_ip),
    ("containsCIDR", "k8s_cidr_contains_cidr", _BOOL, (_MAP, _DYN), True, _contains_cidr),
    ("ip", "k8s_cidr_ip", _MAP, (_MAP,), True, _cidr_ip),
    ("masked", "k8s_cidr_masked", _MAP, (_MAP,), True, _cidr_masked),
    ("prefixLength", "k8s_cidr_prefix_length", _INT, (_MAP,), True, _cidr_prefix_length),
    ("string", "k8s_ip_or_cidr_to_string", _STRING, (_MAP,), False, _to_string),
    # Quantity
    ("quantity", "k8s_string_to_quantity", _MAP, (_STRING,), False, _quantity),
    ("isQuantity", "k8s_is_quantity", _BOOL, (_STRING,), False, _is_quantity),
    ("sign", "k8s_quantity_sign", _INT, (_MAP,), True, _sign),
    ("isInteger", "k8s_quantity_is_integer", _BOOL, (_MAP,), True, _is_integer),
    ("asInteger", "k8s_quantity_as_integer", _INT, (_MAP,), True, _as_integer),
    ("asApproximateFloat", "k8s_quantity_as_float", _DOUBLE, (_MAP,), True,
     lambda v: float(_amount(v))),
    ("compareTo", "k8s_quantity_compare_to", _INT, (_MAP, _MAP), True, _compare),
    ("isGreaterThan", "k8s_quantity_is_greater_than", _BOOL, (_MAP, _MAP), True,
     lambda a, b: _compare(a, b) > 0),
    ("isLessThan", "k8s_quantity_is_less_than", _BOOL, (_MAP, _MAP), True,
     lambda a, b: _compare(a, b) < 0),
    ("add", "k8s_quantity_add", _MAP, (_MAP, _DYN), True,
     lambda a, b: _quantity_value(_amount(a) + _amount(b))),
    ("sub", "k8s_quantity_sub", _MAP, (_MAP, _DYN), True,
     lambda a, b: _quantity_value(_amount(a) - _amount(b))),
)

_AUTHZ: Final[tuple[_OverloadSpec, ...]] = (
    # a ValidatingAdmissionPolicy's `authorizer`, offline: see `authz`
    ("path", "k8s_authorizer_path", _MAP, (_MAP, _STRING), True, authz.path),
    ("group", "k8s_authorizer_group", _MAP, (_MAP, _STRING), True, authz.group),
    ("serviceAccount", "k8s_authorizer_service_account", _MAP, (_MAP, _STRING, _STRING), True,
     authz.service_account),
    ("resource", "k8s_group_check_resource", _MAP, (_MAP, _STRING), True, authz.resource),
    ("subresource", "k8s_resource_check_subresource", _MAP, (_MAP, _STRING), True,
     authz.subresource),
    ("namespace", "k8s_resource_check_namespace", _MAP, (_MAP, _STRING), True, authz.namespace),
    ("name", "k8s_resource_check_name", _MAP, (_MAP, _STRING), True, authz.name),
    ("check", "k8s_check", _MAP, (_MAP, _STRING), True, authz.check),
    ("allowed", "k8s_decision_allowed", _BOOL, (_MAP,), True, authz.allowed),
    ("reason", "k8s_decision_reason", _STRING, (_MAP,), True, authz.reason),
    ("errored", "k8s_decision_errored", _BOOL, (_MAP,), True, authz.errored),
    ("error", "k8s_decision_error", _STRING, (_MAP,), True, authz.error),
)
