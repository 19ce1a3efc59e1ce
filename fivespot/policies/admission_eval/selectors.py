"""Kubernetes label selectors (`matchLabels` + `matchExpressions`), as admission matching uses them.

A nil selector and the empty selector `{}` both select everything. Every namespace carries the
label `kubernetes.io/metadata.name: <its name>` (the API server sets it), so a selector that only
asks for that label can be decided from the namespace's name alone, without its object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

NAME_LABEL: Final = "kubernetes.io/metadata.name"


class SelectorError(ValueError):
    """The selector itself is invalid (unknown operator, values where none are allowed...)."""


def keys(selector: Mapping[str, Any] | None) -> frozenset[str]:
    """Every label key the selector reads."""
    if not selector:
        return frozenset()
    found = set((selector.get("matchLabels") or {}).keys())
    found.update(str(e.get("key", "")) for e in selector.get("matchExpressions") or ())
    return frozenset(found)


def is_empty(selector: Mapping[str, Any] | None) -> bool:
    """Whether it selects everything."""
    return not selector or (not selector.get("matchLabels") and not selector.get("matchExpressions"))


def matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether `labels` satisfy the selector (every term must hold)."""
    if is_empty(selector):
        return True
    assert selector is not None
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or ():
        if not _expression(expression, labels):
            return False
    return True


def _expression(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = str(expression.get("key", ""))
    operator = expression.get("operator")
    values = list(expression.get("values") or ())
    if operator == "In":
        if not values:
            raise SelectorError(f"operator In on {key!r} needs values")
        return key in labels and labels[key] in values
    if operator == "NotIn":
        if not values:
            raise SelectorError(f"operator NotIn on {key!r} needs values")
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    raise SelectorError(f"unknown selector operator {operator!r} on {key!r}")


def namespace_labels(name: str, namespace: Mapping[str, Any] | None) -> dict[str, str]:
    """A namespace's labels as the API server sees them: its own plus the implicit name label."""
    labels: dict[str, str] = {}
    if namespace is not None:
        labels.update((namespace.get("metadata") or {}).get("labels") or {})
    labels[NAME_LABEL] = name
    return labels
