"""What kubectl sends the API server for a YAML document, so `fivespot check` decides that.

kubectl reads a manifest with sigs.k8s.io/yaml: go-yaml v2 composes it and types every plain
scalar by its own rules, map keys are turned into strings, and Go's encoding/json writes the
result, which kubectl decodes into an unstructured object and writes again. PyYAML types by
YAML 1.1 instead, and the two disagree where it changes verdicts:

| plain scalar | kubectl sends | PyYAML reads |
|---|---|---|
| `1e1`, `1.0`, `08` | `10`, `1`, `8` (integers) | `'1e1'`, `1.0`, `'08'` |
| `0o7`, `0B11` | `7`, `3` | strings |
| `1:00` | `"1:00"` | `60` |
| `y`, `N` | `true`, `false` | strings |
| `2001-12-14` | `"2001-12-14"` | a date |
| `.nan`, `.inf` | nothing: kubectl refuses the file | floats |

`plain_scalar` is go-yaml v2's resolver for a plain scalar (`resolve.go` of go.yaml.in/yaml/v2
v2.4.3, the version Kubernetes 1.35 and its kubectl pin); it needs no PyYAML, so `objectyaml`'s fast path asks it whether rapidyaml's reading of a
token is kubectl's. `loader()` is libyaml's parser with that resolver, and `as_sent` turns what it
constructs into what reaches the server: a float without a fraction below 1e21 is an integer
there (Go writes `1` for `1.0`, and the server decodes integers as int64), keys are strings as
sigs.k8s.io/yaml makes them, and a NaN, an infinity or a key JSON cannot hold is an error
(`NotSendable`), as it is for kubectl. Integers past int64 are left as Python integers: the
checker already gives them the float64 meaning the server's decoder gives them.
"""

from __future__ import annotations

import functools
import math
import re
import struct
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # PyYAML is imported where the reference path first needs it
    import yaml

_BOOLS: Final = {word: value for words, value in (
    (("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    (("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
) for word in words}
_NULLS: Final = frozenset({"", "~", "null", "Null", "NULL"})
_SPECIAL_FLOATS: Final = {word: value for words, value in (
    ((".nan", ".NaN", ".NAN"), math.nan),
    ((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    (("-.inf", "-.Inf", "-.INF"), -math.inf),
) for word in words}


class _Merge:
    """go-yaml's `<<`: a merge key."""

    def __repr__(self) -> str:
        return "<<"


MERGE: Final = _Merge()

_GO_INT: Final = re.compile(r"([-+]?)(?:0[bB]([01]+)|0[oO]([0-7]+)|0[xX]([0-9a-fA-F]+)|0([0-7]*)"
                            r"|([1-9][0-9]*))")
"""strconv.ParseInt's syntax with base 0 (underscores already removed): the base from the
prefix, a bare leading 0 for octal."""
_YAML_STYLE_FLOAT: Final = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_DOT_FLOAT: Final = re.compile(r"\.[0-9](?:_?[0-9])*(?:[eE][-+]?[0-9](?:_?[0-9])*)?")
"""strconv.ParseFloat's syntax for text that starts with `.` (underscores between digits)."""
_INT64: Final = 1 << 63
_MERGE_TAG: Final = "tag:yaml.org,2002:merge"
_UINT64: Final = 1 << 64


@functools.lru_cache(maxsize=8192)
def plain_scalar(text: str) -> Any:
    """The value go-yaml v2 resolves a plain (unquoted, untagged) scalar to: a str, bool, None,
    int, float (NaN and infinities included) or MERGE."""
    if not text:
        return None
    hint = text[0]
    if hint in "yYnNtTfFoO~.+-0123456789" or text == "<<":
        if text in _BOOLS:
            return _BOOLS[text]
        if text in _NULLS:
            return None
        if text in _SPECIAL_FLOATS:
            return _SPECIAL_FLOATS[text]
        if text == "<<":
            return MERGE
    if hint == ".":
        if _DOT_FLOAT.fullmatch(text):
            value = float(text.replace("_", ""))
            if not math.isinf(value):
                return value
    elif hint in "+-0123456789":
        return _number(text)
    return text


def _number(text: str) -> Any:
    """A scalar starting with a digit or a sign, as go-yaml tries it: int64, uint64, then a
    YAML-style float (a timestamp stays the text, as does anything else: an integer past uint64
    that is not a finite decimal float too)."""
    plain = text.replace("_", "")
    found = _GO_INT.fullmatch(plain)
    value: int | None = None
    if found is not None:
        sign, binary, octal, hexadecimal, leading_zero, decimal = found.groups()
        digits, base = next((d, b) for d, b in ((binary, 2), (octal, 8), (hexadecimal, 16),
                                                (leading_zero, 8), (decimal, 10)) if d is not None)
        try:
            value = int(digits or "0", base) * (-1 if sign == "-" else 1)
        except ValueError:  # more digits than Python converts: far past uint64
            value = None
        if value is not None and (-_INT64 <= value < _INT64 or not sign and value < _UINT64):
            return value
    if _YAML_STYLE_FLOAT.fullmatch(plain):
        number = float(plain)
        if not math.isinf(number):
            return number
    return text


_SHORT_TAGS: Final = {bool: "bool", type(None): "null", int: "int", float: "float",
                      str: "str", _Merge: "merge"}


def plain_tag(text: str) -> str:
    """The YAML tag go-yaml gives a plain scalar (`tag:yaml.org,2002:int`, ...)."""
    return f"tag:yaml.org,2002:{_SHORT_TAGS[type(plain_scalar(text))]}"


class NotSendable(Exception):
    """kubectl refuses the document: a value or key JSON cannot hold. `field` is where, or
    `line` and `column` (1-based) when known."""

    def __init__(self, field: str, detail: str, line: int = 0, column: int = 0) -> None:
        super().__init__(f"error converting YAML to JSON: {detail}")
        self.field, self.detail, self.line, self.column = field, detail, line, column


def as_sent(value: Any, field: str = "") -> Any:
    """`value` (as `loader()` constructs it: keys already strings) as kubectl sends it; raises
    NotSendable."""
    if isinstance(value, dict):
        return {key: as_sent(item, f"{field}.{key}" if field else key)
                for key, item in value.items()}
    if isinstance(value, list):
        return [as_sent(item, f"{field}[{index}]") for index, item in enumerate(value)]
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            text = "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
            raise NotSendable(field, f"json: unsupported value: {text}")
        return _json_number(value)
    if isinstance(value, bytes):  # !!binary: Go writes the bytes as a string
        return value.decode("utf-8", "replace")
    return value


def _json_number(value: float) -> int | float:
    """A float as the server decodes Go's JSON for it: below 1e21 Go writes an integral float
    as the digits of its shortest form (`-2**63` as `-9223372036854776000`, `2**62` as
    `4611686018427388000`, both Python's `repr` digits too), which the server reads as an int64
    when they fit."""
    if not value.is_integer() or abs(value) >= 1e21:
        return value
    written = int(Decimal(repr(value)))
    return written if -_INT64 <= written < _INT64 else value


def json_key(key: Any) -> str:
    """A map key as sigs.k8s.io/yaml turns it into a JSON object's key; raises NotSendable."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int) and -_INT64 <= key < _INT64:
        return str(key)
    if isinstance(key, float):
        return _go_float32_g(key)
    kind = ("%!s(<nil>)" if key is None else "uint64" if isinstance(key, int) and 0 <= key < _UINT64
            else "*big.Int" if isinstance(key, int) else type(key).__name__)
    shown = "<nil>" if key is None else hex(key) if kind == "uint64" else repr(key)
    raise NotSendable("", f"unsupported map key of type: {kind}, key: {shown}")


def _go_float32_g(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32), with YAML's names for the special values."""
    if math.isnan(value):
        return ".nan"
    try:
        single = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        single = math.copysign(math.inf, value)
    if math.isinf(single):
        return ".inf" if single > 0 else "-.inf"
    if single == 0:
        return "-0" if math.copysign(1, single) < 0 else "0"
    for precision in range(1, 10):  # the shortest digits that read back as the same float32
        text = f"{single:.{precision - 1}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == single:
            break
    mantissa, exponent = text.split("e")
    sign = "-" if mantissa.startswith("-") else ""
    digits = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0"
    power = int(exponent)
    if power < -4 or power >= 6:  # %e: Go's shortest 'g' decides at precision 6
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{body}e{'-' if power < 0 else '+'}{abs(power):02d}"
    point = power + 1
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"


@functools.cache
def loader() -> type[yaml.SafeLoader]:
    """libyaml's parser (PyYAML's pure-Python one without it) typing plain scalars as go-yaml
    does, and explicit tags as go-yaml takes them (`!!int "5"` is 5, `!!float 1` is 1.0, an
    unknown tag keeps its node's plain value)."""
    import yaml

    base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class KubectlLoader(base):  # type: ignore[valid-type,misc]
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self._merges: dict[int, dict[str, Any]] = {}

        def resolve(self, kind: type[yaml.Node], value: str, implicit: tuple[bool, bool]) -> str:
            if kind is yaml.ScalarNode and implicit[0]:
                return plain_tag(value)
            return str(super().resolve(kind, value, implicit))

        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[str, Any]:
            """Keys made strings as they are read: `true`, `y` and `1` are distinct keys to
            kubectl until it writes them, but `True == 1` in a Python dict. A merge (`<<`) sets
            its mapping's keys where it stands, as go-yaml's decoder does: over the keys before
            it, under those after it (YAML says every key given wins; PyYAML does that)."""
            mapping: dict[str, Any] = {}
            for key_node, value_node in node.value:
                if key_node.tag == _MERGE_TAG:
                    for merged in self._merged(value_node):
                        mapping.update(self._merge_of(merged))
                    continue
                try:
                    key = json_key(self.construct_object(key_node, deep=deep))
                except NotSendable as error:
                    mark = key_node.start_mark
                    raise NotSendable(error.field, error.detail, mark.line + 1,
                                      mark.column + 1) from None
                mapping[key] = self.construct_object(value_node, deep=deep)
            return mapping

        def _merge_of(self, node: yaml.MappingNode) -> dict[str, Any]:
            """The keys a merge of `node` sets, constructed once per document however often it
            is merged: `a2: &a2 {<<: [*a1, *a1]}` (and so on) must not double the work at each
            level. Never changed once made: a merge copies it."""
            found = self._merges.get(id(node))
            if found is None:
                found = self._merges[id(node)] = self.construct_mapping(node, deep=True)
            return found

        def construct_document(self, node: yaml.Node) -> Any:
            try:
                return super().construct_document(node)
            finally:
                self._merges.clear()  # keyed by node: only while its document is alive

        def _merged(self, node: yaml.Node) -> list[yaml.MappingNode]:
            """The mappings a merge sets, in the order set: a list's last first, so its earlier
            ones win."""
            found = [node] if isinstance(node, yaml.MappingNode) else (
                list(reversed(node.value)) if isinstance(node, yaml.SequenceNode) else [])
            if not found or not all(isinstance(n, yaml.MappingNode) for n in found):
                raise yaml.constructor.ConstructorError(
                    None, None, "map merge requires map or sequence of maps as the value",
                    node.start_mark)
            return found

    for short in ("bool", "int", "float", "null"):
        KubectlLoader.add_constructor(f"tag:yaml.org,2002:{short}", _resolved)
    KubectlLoader.add_constructor("tag:yaml.org,2002:merge", lambda _, __: "<<")
    KubectlLoader.add_constructor("tag:yaml.org,2002:timestamp", _text)
    KubectlLoader.add_constructor("tag:yaml.org,2002:set", base.construct_yaml_map)
    KubectlLoader.add_constructor("tag:yaml.org,2002:omap", base.construct_yaml_seq)
    KubectlLoader.add_constructor("tag:yaml.org,2002:pairs", base.construct_yaml_seq)
    KubectlLoader.add_constructor(None, _untagged)
    return KubectlLoader


def _resolved(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    """A scalar tagged (or typed) bool, int, float or null: go-yaml resolves its text and
    refuses it when that is not of the tag's kind, but takes an integer as a float."""
    import yaml

    value = plain_scalar(node.value)
    wanted = node.tag.rsplit(":", 1)[-1]
    got = _SHORT_TAGS[type(value)]
    if wanted == "float" and got == "int":
        return float(value)
    if got != wanted:
        raise yaml.constructor.ConstructorError(
            None, None, f"cannot decode !!{got} `{node.value}` as a !!{wanted}", node.start_mark)
    return value


def _text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> str:
    return str(node.value)


def _untagged(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return node.value

