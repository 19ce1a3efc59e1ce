"""A CEL rule's verdict on one value as cel-go gives it (the `cel_expr_python` binding of the
library the API server runs), shared by the unit tests that hold a model's validator and its
admission rule to the same answer."""

from __future__ import annotations

from cel_expr_python import cel

_CEL = cel.NewEnv(variables={"self": cel.Type.DYN})


def cel_accepts(rule: str, value: object) -> bool:
    """False when the rule evaluates to false or to an error; the API server rejects both."""
    result = _CEL.compile(rule).eval(data={"self": value})
    return result.type().name() != "ERROR" and result.value() is True
