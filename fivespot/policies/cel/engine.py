"""fivespot's one CEL engine: cel-expr-python (cel-cpp) configured to behave like Kubernetes.

The compiler checks every rule it emits with this module, the offline checker evaluates them to
predict the API server's verdict, and the webhook evaluates them at admission, so all three must
see the same language. This module owns the environment (extensions, declared variables, the
Kubernetes function library), compilation with the Kubernetes deviations from stock cel-cpp
(cross-type numeric comparisons, literal validators), conversion of Python values in and out,
and the mapping of error texts to the wording cel-go, and therefore `kubectl`, uses.

Programs are cached by (expression, variables) and are safe to evaluate from many threads; they
pickle (as cel-cpp's serialized form and the checked AST), so `fivespot check` can keep them
between runs (`fivespot.compiler.check.cache`).
"""

from __future__ import annotations

import functools
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Final

from cel_expr_python import cel
from msgspec import Struct

from fivespot.policies.cel import checked, library
from fivespot.policies.cel.checked import CheckedAst
from fivespot.policies.cel.literals import Issue, literal_issues

EXTENSIONS: Final = (
    "strings",
    "optional",
    "math",
    "encoders",
    "bindings",
    "lists",
    "sets",
    "two-var-comprehensions",
)

CRD_VARIABLES: Final = frozenset({"self", "oldSelf"})
ADMISSION_VARIABLES: Final = frozenset(
    {"object", "oldObject", "request", "params", "namespaceObject", "variables", "authorizer"}
)

_OLD_SELF: Final = "oldSelf"
_AUTHORIZER: Final = "authorizer"
_HAS_OLD_SELF: Final = "fivespot_hasOldSelf_"
_OLD_SELF_VALUE: Final = "fivespot_oldSelf_"
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1

_ORDERING: Final = r"_(?:<|<=|>|>=)_"
_NUMERIC: Final = r"(?:int|uint|double)"
_CROSS_TYPE_COMPARISON: Final = re.compile(
    rf"found no matching overload for '{_ORDERING}' applied to '\(({_NUMERIC}), ({_NUMERIC})\)'"
)
_ISSUE_START: Final = re.compile(r"^ERROR: <input>:\d+:\d+: ", re.MULTILINE)
_STATUS_PREFIX: Final = re.compile(r"^[A-Z_]+: ")
_STATUS_SUFFIX: Final = re.compile(r"\s*\[[A-Z_]+\]$")
_INT_OUT_OF_RANGE: Final = re.compile(r"Integer value '-?\d+' out of range")
_COMPILE_LOCK: Final = threading.Lock()


class CelCompileError(Exception):
    """The expression is not valid CEL for Kubernetes; `message` is what cel-go would print."""

    def __init__(self, message: str, expression: str) -> None:
        super().__init__(message)
        self.message = message
        self.expression = expression


class CelEvaluationError(Exception):
    """Evaluating a compiled expression failed (no such key, no such overload, ...)."""

    def __init__(self, message: str, expression: str) -> None:
        super().__init__(message)
        self.message = message
        self.expression = expression


class Program(Struct, frozen=True, eq=False):
    """A compiled expression, ready to evaluate against an activation of its variables."""

    expression: str
    variables: frozenset[str]
    tree: CheckedAst
    result_type: str
    optional_old_self: bool
    _compiled: cel.Expression

    def evaluate(self, activation: Mapping[str, object]) -> object:
        """The plain-Python value of the expression; raises CelEvaluationError on CEL errors.

        Keys are the declared variable names. With `optional_old_self`, leave `oldSelf` out when
        there is no old value (CREATE, or the field is new) and CEL sees `optional.none()`.
        """
        data = self._data(activation) if self.optional_old_self else activation
        result = self._run(data)
        quick = _plain_bool(result)
        if quick is not None:
            return quick
        if result.type() == cel.Type.ERROR and _INT_OUT_OF_RANGE.search(str(result)):
            # Kubernetes decodes integers beyond int64 as float64; cel-cpp refuses them. Only
            # activations that hit this pay for the normalising copy.
            result = self._run({key: normalise(value) for key, value in data.items()})
        if result.type() == cel.Type.ERROR:
            raise CelEvaluationError(cel_go_wording(str(result)), self.expression)
        try:
            plain = result.plain_value()
        except RuntimeError as error:
            raise CelEvaluationError(cel_go_wording(str(error)), self.expression) from error
        return to_python(plain)

    def evaluate_bound(self, bound: Bound) -> object:
        """Like `evaluate`, against an activation built once with `bind` and shared by several
        programs (converting a large object into CEL once, not once per program).

        Falls back to `evaluate` when the program was compiled with other variables or with
        `optional_old_self`, and for the integers-beyond-int64 retry.
        """
        if self.optional_old_self or bound.variables != self.variables:
            return self.evaluate(bound.data)
        try:
            result = self._compiled.eval(activation=bound.activation)
        except RuntimeError as error:
            raise CelEvaluationError(cel_go_wording(str(error)), self.expression) from error
        quick = _plain_bool(result)
        if quick is not None:
            return quick
        if result.type() == cel.Type.ERROR:
            if _INT_OUT_OF_RANGE.search(str(result)):
                return self.evaluate(bound.data)
            raise CelEvaluationError(cel_go_wording(str(result)), self.expression)
        try:
            plain = result.plain_value()
        except RuntimeError as error:
            raise CelEvaluationError(cel_go_wording(str(error)), self.expression) from error
        if isinstance(plain, (bool, str, int, float)):
            return plain
        return to_python(plain)

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (_restored, (self.expression, tuple(sorted(self.variables)), self.tree,
                            self.result_type, self.optional_old_self, self._compiled.serialize()))

    def _data(self, activation: Mapping[str, object]) -> dict[str, object]:
        data = dict(activation)
        if self.optional_old_self:
            data[_HAS_OLD_SELF] = _OLD_SELF in data
            data[_OLD_SELF_VALUE] = data.pop(_OLD_SELF, None)
        return data

    def _run(self, data: Mapping[str, object]) -> cel.Value:
        try:
            return self._compiled.eval(data=data)
        except RuntimeError as error:
            raise CelEvaluationError(cel_go_wording(str(error)), self.expression) from error


class Bound(Struct, frozen=True, eq=False):
    """An activation converted into CEL once, for `Program.evaluate_bound`."""

    variables: frozenset[str]
    data: Mapping[str, object]
    activation: cel.Activation


def bind(variables: Iterable[str], data: Mapping[str, object]) -> Bound:
    """Convert `data` (keys: declared variable names) once for programs declaring `variables`.

    Building it costs about as much as one evaluation with a plain mapping; every evaluation
    against it afterwards skips the conversion.
    """
    declared = frozenset(variables)
    return Bound(declared, data, _environment(declared, False).Activation(data=data))


def compile_expression(
    expr: str, variables: Iterable[str], *, optional_old_self: bool = False
) -> Program:
    """Compile `expr` with `variables` declared as `dyn`; raises CelCompileError.

    `optional_old_self` gives CRD rules the `optionalOldSelf: true` behaviour: `oldSelf` is an
    `optional_type(dyn)` and the rule also runs when there is no old value.
    """
    names = frozenset(variables)
    key = (expr, names, optional_old_self and _OLD_SELF in names)
    with _PROGRAMS_LOCK:
        found = _PROGRAMS.get(key)
        if found is not None:
            _PROGRAMS.move_to_end(key)
            return found
    found = _compile(expr, names, optional_old_self)
    _remember(key, found)
    return found


_PROGRAMS: Final[OrderedDict[tuple[str, frozenset[str], bool], Program]] = OrderedDict()
"""The programs compiled (or restored) in this process, by (expression, variables, whether
`oldSelf` is optional), least recently used first."""
_MAX_PROGRAMS: Final = 4096
_PROGRAMS_LOCK: Final = threading.Lock()


def _remember(key: tuple[str, frozenset[str], bool], program: Program) -> None:
    with _PROGRAMS_LOCK:
        _PROGRAMS[key] = program
        _PROGRAMS.move_to_end(key)
        if len(_PROGRAMS) > _MAX_PROGRAMS:
            _PROGRAMS.popitem(last=False)


def compiled_programs() -> list[Program]:
    """The programs compiled in this process so far: what a cache between processes keeps
    (a Program pickles as its checked AST and cel-cpp's serialized form)."""
    with _PROGRAMS_LOCK:
        return list(_PROGRAMS.values())


def restore_programs(programs: Iterable[Program]) -> None:
    """Make `compile_expression` answer with these programs (unpickled from an earlier process
    that compiled them with this same code) instead of compiling them again."""
    for program in programs:
        _remember((program.expression, program.variables, program.optional_old_self), program)


def _restored(expression: str, variables: tuple[str, ...], tree: CheckedAst, result_type: str,
              optional_old_self: bool, serialized: bytes) -> Program:
    names = frozenset(variables)
    hidden = (names - {_OLD_SELF}) | {_HAS_OLD_SELF, _OLD_SELF_VALUE}
    env = _environment(frozenset(hidden) if optional_old_self else names, False)
    with _COMPILE_LOCK:
        compiled = env.deserialize(serialized)
    return Program(expression, names, tree, result_type, optional_old_self, compiled)


def _compile(expr: str, variables: frozenset[str], optional_old_self: bool) -> Program:
    compiled, tree = _check(expr, variables, optional_old_self)
    if optional_old_self and _OLD_SELF in variables:
        compiled = _compile_with_optional_old_self(expr, variables)
    return Program(
        expression=expr,
        variables=variables,
        tree=tree,
        result_type=tree.type_of(tree.root),
        optional_old_self=optional_old_self and _OLD_SELF in variables,
        _compiled=compiled,
    )


def _check(
    expr: str, variables: frozenset[str], optional_old_self: bool
) -> tuple[cel.Expression, CheckedAst]:
    env = _environment(variables, optional_old_self and _OLD_SELF in variables)
    compiled = _compile_or_raise(env, expr, expr)
    tree = checked.decode(compiled.serialize())
    issues = literal_issues(tree, _literal_is_valid)
    if issues:
        raise CelCompileError(_format_issues(expr, tree, issues), expr)
    return compiled, tree


def _compile_with_optional_old_self(expr: str, variables: frozenset[str]) -> cel.Expression:
    # cel-expr-python cannot pass an optional value in, so the rule is wrapped to build it from
    # two hidden variables. Positions in errors come from the unwrapped compile in `_check`.
    wrapped = (
        f"cel.bind({_OLD_SELF}, {_HAS_OLD_SELF} ? optional.of({_OLD_SELF_VALUE}) "
        f": optional.none(), (\n{expr}\n))"
    )
    hidden = (variables - {_OLD_SELF}) | {_HAS_OLD_SELF, _OLD_SELF_VALUE}
    return _compile_or_raise(_environment(frozenset(hidden), False), wrapped, expr)


def _compile_or_raise(env: cel.Env, source: str, expr: str) -> cel.Expression:
    with _COMPILE_LOCK:
        try:
            return env.compile(source)
        except RuntimeError as error:
            message = _strip_status(str(error))
            if not _only_cross_type_comparisons(message):
                raise CelCompileError(message, expr) from None
        # Kubernetes enables cross-type numeric comparisons (`1 < 1.5`); cel-cpp's checker has no
        # such overloads but its runtime compares mixed numbers correctly.
        try:
            return env.compile(source, disable_check=True)
        except RuntimeError as error:
            raise CelCompileError(_strip_status(str(error)), expr) from None


def _only_cross_type_comparisons(message: str) -> bool:
    issues = [issue for issue in _ISSUE_START.split(message) if issue.strip()]
    if not issues:
        return False
    for issue in issues:
        match = _CROSS_TYPE_COMPARISON.match(issue)
        if match is None or match.group(1) == match.group(2):
            return False
    return True


@functools.lru_cache(maxsize=64)
def _environment(variables: frozenset[str], optional_old_self: bool) -> cel.Env:
    lines = ["extensions:"]
    lines += [f'  - name: "{name}"' for name in EXTENSIONS]
    lines.append("variables:")
    for name in sorted(variables):
        lines.append(f'  - name: "{name}"')
        if optional_old_self and name == _OLD_SELF:
            lines += ['    type_name: "optional_type"', "    params:", '      - type_name: "dyn"']
        else:
            lines.append('    type_name: "dyn"')
    # The Kubernetes library is registered after the config's strings extension: registering
    # list `indexOf` before it fails with ALREADY_EXISTS.
    with _COMPILE_LOCK:
        config = cel.NewEnvConfigFromYaml("\n".join(lines) + "\n")
        return cel.NewEnv(config=config, extensions=[
            library.extension(admission=_AUTHORIZER in variables)])


# --- literal validation -------------------------------------------------------------------------


def _literal_is_valid(kind: str, literal: str) -> bool:
    result_type: cel.Type = _literal_probe(kind).eval(data={"v": literal}).type()
    return not result_type == cel.Type.ERROR


@functools.lru_cache(maxsize=3)
def _literal_probe(kind: str) -> cel.Expression:
    source = {"duration": "duration(v)", "timestamp": "timestamp(v)", "regex": "''.matches(v)"}
    env = cel.NewEnv(variables={"v": cel.Type.STRING})
    with _COMPILE_LOCK:
        return env.compile(source[kind])


def _format_issues(expr: str, tree: CheckedAst, issues: list[Issue]) -> str:
    return "\n".join(format_issue(expr, tree.positions.get(i.expr_id, 0), i.message) for i in issues)


def format_issue(expr: str, offset: int, message: str) -> str:
    """One issue in cel-go's layout: location, message, source line and a caret."""
    line_start = expr.rfind("\n", 0, offset) + 1
    line_end = expr.find("\n", offset)
    line_text = expr[line_start : line_end if line_end >= 0 else len(expr)]
    line = expr.count("\n", 0, offset) + 1
    column = offset - line_start
    return (
        f"ERROR: <input>:{line}:{column + 1}: {message}\n"
        f" | {line_text}\n"
        f" | {'.' * column}^"
    )


def _plain_bool(result: cel.Value) -> bool | None:
    """The result when it is a bool (most rules), read without the error and type checks: an
    error's plain value is its text, never a bool. None for anything else."""
    try:
        plain = result.plain_value()
    except RuntimeError:
        return None
    return plain if plain.__class__ is bool else None


# --- values in and out --------------------------------------------------------------------------


def normalise(value: object) -> object:
    """A JSON-shaped value as Kubernetes' unstructured decoding would hand it to CEL."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and not _INT64_MIN <= value <= _INT64_MAX:
        return float(value)
    if isinstance(value, Mapping):
        return {key: normalise(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalise(item) for item in value]
    return value


def to_python(value: object) -> object:
    """cel-expr-python's plain value made plain: bytes for bytearray, library values as text."""
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, dict):
        text = library.as_text(value)
        if text is not None:
            return text
        return {to_python(key): to_python(item) for key, item in value.items()}
    if isinstance(value, list):
        return [to_python(item) for item in value]
    if isinstance(value, (datetime, timedelta)) or value is None:
        return value
    if isinstance(value, cel.Type):
        return value.name().lower()
    return value


# --- error wording ------------------------------------------------------------------------------

_WORDING: Final = (
    (re.compile(r'^Key not found in map : "(.*)"$', re.DOTALL), r"no such key: \1"),
    (
        re.compile(r"^Index error: index=(-?\d+) size=(\d+)$"),
        r"index '\1' out of range in list size '\2'",
    ),
    (re.compile(r"^No matching overloads found : (.*)$"), r"no such overload: \1"),
    (
        re.compile(r'^No value with name "(.*)" found in Activation$'),
        r"no such attribute(s): \1",
    ),
    (re.compile(r"^divide by zero$"), "division by zero"),
    # Conversions, as cel-go's String.ConvertToType / Double / Int words their failures.
    (re.compile(r"^String to Duration conversion failed$"),
     "type conversion error from 'string' to 'google.protobuf.Duration'"),
    (re.compile(r"^String to Timestamp conversion failed$"),
     "type conversion error from 'string' to 'google.protobuf.Timestamp'"),
    (re.compile(r"^cannot convert string to (int|uint|double)$"),
     r"type conversion error from 'string' to '\1'"),
    (re.compile(r"^Type conversion error from '(\w+)' to '(\w+)'$"),
     r"type conversion error from '\1' to '\2'"),
    (re.compile(r"^double out of int64 range$"), "integer overflow"),
    (re.compile(r"^(?:int64|double) out of uint64 range$"), "unsigned integer overflow"),
)


def cel_go_wording(message: str) -> str:
    """cel-cpp's error text, reworded to cel-go's where Kubernetes users would see it."""
    text = _strip_status(message)
    for pattern, replacement in _WORDING:
        if pattern.match(text):
            return pattern.sub(replacement, text).replace("int64", "int").replace("uint64", "uint")
    return text


def _strip_status(message: str) -> str:
    return _STATUS_SUFFIX.sub("", _STATUS_PREFIX.sub("", message.strip()))
