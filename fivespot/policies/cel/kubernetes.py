"""How the API server runs a CRD `x-kubernetes-validations` rule, on top of the engine.

A rule that mentions `oldSelf` is a transition rule: the API server skips it when there is no old
value (CREATE, or the field did not exist before) unless the rule sets `optionalOldSelf: true`, in
which case it runs with `oldSelf` as an optional. It also refuses, at CRD write time, a rule whose
result is not a bool and an `optionalOldSelf` on a rule that never reads `oldSelf`. The offline
checker must make the same calls to agree with the cluster, so they live here, once.
"""

from __future__ import annotations

from typing import Final

from msgspec import Struct, field

from fivespot.policies import memo
from fivespot.policies.cel import checked
from fivespot.policies.cel.checked import Expr
from fivespot.policies.cel.engine import (
    CRD_VARIABLES,
    CelCompileError,
    CelEvaluationError,
    Program,
    compile_expression,
)

OLD_SELF: Final = "oldSelf"


class _Absent:
    """The old value of a field that did not exist before (or a CREATE)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()
_SCALARS: Final = frozenset({str, int, float, bool})


class CrdRule(Struct, frozen=True):
    """A compiled `x-kubernetes-validations` rule."""

    rule: str
    program: Program
    transition: bool
    optional_old_self: bool
    seen: dict[tuple[type, object], bool] = field(default_factory=dict)
    """Verdicts on scalars without an old value, by type and value (`1`, `1.0` and `true`
    apart): the same field checked in many objects is mostly given the same few values, and a
    rule is a function of them (CEL is deterministic)."""

    def evaluate(self, self_value: object, old_self: object = ABSENT) -> bool | None:
        """The rule's verdict, or None when the API server would not run it at all."""
        if old_self is ABSENT and self_value.__class__ in _SCALARS:
            # a float by its repr: -0.0 == 0.0, yet `string(self)` tells them apart
            key = (float, repr(self_value)) if self_value.__class__ is float else (
                self_value.__class__, self_value)
            found = self.seen.get(key)
            if found is None:
                found = self._evaluate(self_value, old_self)
                if found is not None:
                    memo.remember(self.seen, key, found)
            return found
        return self._evaluate(self_value, old_self)

    def _evaluate(self, self_value: object, old_self: object) -> bool | None:
        activation: dict[str, object] = {"self": self_value}
        if old_self is not ABSENT:
            activation[OLD_SELF] = old_self
        elif self.transition and not self.optional_old_self:
            return None
        result = self.program.evaluate(activation)
        if not isinstance(result, bool):
            raise CelEvaluationError(
                f"rule evaluated to {type(result).__name__}, not a bool", self.rule
            )
        return result


def compile_crd_rule(rule: str, *, optional_old_self: bool = False) -> CrdRule:
    """Compile a CRD rule with `self`/`oldSelf`; raises CelCompileError as the API server would."""
    program = compile_expression(rule, CRD_VARIABLES, optional_old_self=optional_old_self)
    transition = references_variable(program.tree.root, OLD_SELF)
    if optional_old_self and not transition:
        raise CelCompileError("may not be set if oldSelf is not used in rule", rule)
    if program.result_type not in {"bool", checked.DYN}:
        raise CelCompileError("cel expression must evaluate to a bool", rule)
    return CrdRule(rule, program, transition, optional_old_self)


def references_old_self(expr: str) -> bool:
    """Whether `expr` is a transition rule (reads `oldSelf`); raises CelCompileError."""
    program = compile_expression(expr, CRD_VARIABLES)
    return references_variable(program.tree.root, OLD_SELF)


def references_variable(root: Expr, name: str) -> bool:
    """Whether the tree reads the declared variable `name` (not a comprehension's own)."""
    return _references(root, name, frozenset())


def _references(node: Expr, name: str, shadowed: frozenset[str]) -> bool:
    if isinstance(node, checked.Ident):
        return node.name == name and name not in shadowed
    if isinstance(node, checked.Comprehension):
        if _references(node.iter_range, name, shadowed):
            return True
        if _references(node.accu_init, name, shadowed):
            return True
        inner = shadowed | {node.iter_var, node.iter_var2, node.accu_var}
        return any(
            _references(part, name, inner)
            for part in (node.loop_condition, node.loop_step, node.result)
        )
    return any(_references(child, name, shadowed) for child in checked.children(node))

