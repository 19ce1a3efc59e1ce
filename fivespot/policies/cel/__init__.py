"""fivespot's CEL: one engine with Kubernetes' behaviour, and the API server's cost estimate
(imported on first use).

Everything that compiles or evaluates CEL (compiler, offline checker, webhook, controllers) goes
through this package so that all of them accept, reject and price the same expressions.
"""

from typing import TYPE_CHECKING, Any

from fivespot.policies.cel.engine import (
    ADMISSION_VARIABLES,
    CRD_VARIABLES,
    Bound,
    CelCompileError,
    CelEvaluationError,
    Program,
    bind,
    compile_expression,
)
from fivespot.policies.cel.kubernetes import ABSENT, CrdRule, compile_crd_rule, references_old_self

if TYPE_CHECKING:
    from fivespot.policies.cel.cost import (
        PER_CRD_LIMIT,
        PER_RULE_LIMIT,
        CostEstimate,
        budget_violation,
        estimate_cost,
    )

_COST_NAMES = frozenset({"PER_CRD_LIMIT", "PER_RULE_LIMIT", "CostEstimate", "budget_violation",
                         "estimate_cost"})


def __getattr__(name: str) -> Any:
    # The cost estimate is the compiler's (it prices every rule it emits); what only evaluates
    # rules (`fivespot check`, the webhook) does not pay for importing it.
    if name in _COST_NAMES:
        from fivespot.policies.cel import cost

        return getattr(cost, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "ABSENT",
    "ADMISSION_VARIABLES",
    "Bound",
    "CRD_VARIABLES",
    "PER_CRD_LIMIT",
    "PER_RULE_LIMIT",
    "CelCompileError",
    "CelEvaluationError",
    "CostEstimate",
    "CrdRule",
    "Program",
    "bind",
    "budget_violation",
    "compile_crd_rule",
    "compile_expression",
    "estimate_cost",
    "references_old_self",
]
