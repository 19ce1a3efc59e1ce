"""The CEL rule walk: every `x-kubernetes-validations` rule of a custom resource, as the API
server runs them.

apiextensions-apiserver's `schema/cel`: rules run only on values that exist, and only when the
structural validation reported no blocking error (`crd` decides that); at the root, `self`
sees only `metadata.name` and `generateName`; on UPDATE an unchanged node runs only its
transition rules (the others are ratcheted), and `oldSelf` correlates by map keys in
`x-kubernetes-list-type: map` lists. The rules themselves were compiled with the schema
(`structural`); each node's walk is a closure built once (`build_rule_walker`, attached by
`crd.compile_schema`).
"""

from __future__ import annotations

from typing import Any, Final

from fivespot.policies.admission_eval.structural import (
    DUPLICATE,
    INVALID,
    FieldError,
    Node,
    Rule,
    RuleWalker,
    correlate_items,
    join_path,
    path_prefix,
    strictly_equal,
    type_ok,
)
from fivespot.policies.admission_eval.gotext import OMIT, error_body
from fivespot.policies.cel import ABSENT, CelEvaluationError
from fivespot.policies.kubeversions import KubernetesVersion

def validate_rules(value: Any, old: Any, node: Node, path: str, errors: list[FieldError],
                   *, root: bool = False, schema_ok: bool = False) -> None:
    """Run every `x-kubernetes-validations` rule on `value` and below (values that exist).

    Where `old` equals `value` (UPDATE of an unchanged node) only transition rules run: the
    API server ratchets the others. `schema_ok`: `validate` of the same value and old value
    reported no error, so every schema `pattern` it checked matched; a rule that is exactly
    `self.matches()` of its node's own pattern is then known to hold without running it again.
    """
    if node.check_rules is not None:
        node.check_rules(value, old, path, errors, root, schema_ok)


def build_rule_walker(node: Node, server: KubernetesVersion) -> RuleWalker:
    """The rule walk of a node with rules at or below it: its own rules, then only the children
    that have rules below them; failures worded as the API server of version `server` words
    them."""
    rules, transition_below, proven_below = node.rules, node.transition_below, node.proven_below
    value_shown = server.crd_rule_error_value
    objects = node.type in (None, "object")
    declared = frozenset(node.properties or ())
    walkers = {key: child.check_rules for key, child in (node.properties or {}).items()
               if child.check_rules is not None}
    additional = node.additional.check_rules if node.additional is not None else None
    items = node.items.check_rules if node.items is not None else None
    # With one child to walk (and no map values), it is looked up rather than searched for.
    only_child = next(iter(walkers.items())) if len(walkers) == 1 and additional is None else None

    def check_rules(value: Any, old: Any, path: str, errors: list[FieldError], root: bool,
                    schema_ok: bool) -> None:
        if value is None or (schema_ok and proven_below):
            return
        unchanged = old is not ABSENT and strictly_equal(value, old)
        if unchanged and not transition_below:
            return
        if rules and type_ok(value, node):
            self_value = _root_view(value) if root else value
            old_value = _root_view(old) if root and isinstance(old, dict) else old
            for rule in rules:
                if unchanged and not rule.compiled.transition:
                    continue
                error = _run_rule(rule, self_value, old_value, node, path, value_shown)
                if error is not None:
                    errors.append(error)
        if isinstance(value, dict):
            if not objects:
                return
            old_map = old if isinstance(old, dict) else None
            if only_child is not None:
                only_key, only_walk = only_child
                if only_key in value:
                    only_walk(value[only_key], old_map.get(only_key, ABSENT) if old_map is not None
                              else ABSENT, join_path(path, only_key), errors, False, schema_ok)
                return
            prefix = path_prefix(path)
            for key, item in value.items():
                walk = walkers.get(key)
                if walk is not None:
                    child_path = prefix + key
                elif additional is not None and key not in declared:
                    walk, child_path = additional, f"{path}[{key}]"
                else:
                    continue
                walk(item, old_map.get(key, ABSENT) if old_map is not None else ABSENT, child_path,
                     errors, False, schema_ok)
        elif isinstance(value, list) and items is not None:
            olds = correlate_items(value, old, node)
            for index, item in enumerate(value):
                items(item, olds[index], f"{path}[{index}]", errors, False, schema_ok)

    return _with_pattern_fast_path(node, check_rules) or check_rules


def _with_pattern_fast_path(node: Node, check_rules: RuleWalker) -> RuleWalker | None:
    """For a string leaf whose rules are all `self.matches('<constant>')`: a walk that decides a
    new string value matching every pattern with RE2 alone (skipping the patterns the structural
    check already matched, when it reported nothing), and hands anything else (a mismatch,
    another type, null, an UPDATE) to `check_rules`, which reports exactly as without it."""
    patterns = [rule.pattern for rule in node.rules if rule.pattern is not None]
    if (node.type != "string" or node.int_or_string or not node.rules
            or len(patterns) != len(node.rules)):
        return None
    searches = tuple(pattern.search for pattern in patterns)
    schema_pattern = node.pattern[0] if node.pattern is not None else None
    unproven = tuple(pattern.search for pattern in patterns if pattern.source != schema_pattern)

    def check_pattern_leaf(value: Any, old: Any, path: str, errors: list[FieldError], root: bool,
                           schema_ok: bool) -> None:
        if value.__class__ is not str or old is not ABSENT or root or not all(
                search(value) for search in (unproven if schema_ok else searches)):
            check_rules(value, old, path, errors, root, schema_ok)

    return check_pattern_leaf


def _root_view(obj: dict[str, Any]) -> dict[str, Any]:
    """At the root, CEL sees only `metadata.name` and `metadata.generateName`."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return obj
    view = dict(obj)
    view["metadata"] = {k: meta[k] for k in ("name", "generateName") if k in meta}
    return view


def _run_rule(rule: Rule, value: Any, old: Any, node: Node, path: str, value_shown: str
              ) -> FieldError | None:
    """apiextensions-apiserver's `validateExpressions` for one rule: a runtime error is an Invalid
    value naming the schema type, a false result an error of the rule's reason showing the value
    (objects and arrays omitted), or the schema type where `value_shown` says so (1.34)."""
    try:
        if rule.pattern is not None and isinstance(value, str):
            verdict: bool | None = rule.pattern.search(value)
        else:
            verdict = rule.compiled.evaluate(value, old)
    except CelEvaluationError as error:
        if error.message.startswith("no such overload"):
            detail = (f"'{error.message}': call arguments did not match a supported operator, "
                      f"function or macro signature for rule: {_rule_text(rule)}")
        else:
            detail = f"{error.message} evaluating rule: {_rule_text(rule)}"
        return FieldError(path, INVALID, error_body(INVALID, _schema_type(node), detail), rule.rule)
    if verdict is None or verdict:
        return None
    message = _rule_message(rule, value, old)
    target = path
    if rule.field_path:
        target = path + rule.field_path if rule.field_path.startswith("[") else path + (
            rule.field_path if rule.field_path.startswith(".") else "." + rule.field_path)
        target = target.lstrip(".")
    if value_shown == "schema-type":
        shown: Any = _schema_type(node)
    else:
        shown = OMIT if node.type in ("object", "array") else value
    if rule.reason == DUPLICATE:  # field.Duplicate takes no detail
        return FieldError(target, DUPLICATE, error_body(DUPLICATE, shown, ""), rule.rule)
    return FieldError(target, rule.reason, error_body(rule.reason, shown, message), rule.rule)


def _schema_type(node: Node) -> str:
    return str(node.type or "")


def _rule_text(rule: Rule) -> str:
    """`ruleErrorString`: the rule's message if it has one, else the rule itself."""
    return (rule.message or rule.rule).strip()


MAX_MESSAGE_BYTES: Final = 5 * 1024
"""celconfig.MaxEvaluatedMessageExpressionSizeBytes."""


def _rule_message(rule: Rule, value: Any, old: Any) -> str:
    """`messageExpression`'s result when it gives a usable one (a non-empty single line of at most
    5 KiB, trimmed), else `message`, else `failed rule: RULE`."""
    if rule.message_expression is not None:
        activation: dict[str, Any] = {"self": value}
        if old is not ABSENT:
            activation["oldSelf"] = old
        try:
            text = rule.message_expression.evaluate(activation)
        except CelEvaluationError:
            text = None
        if isinstance(text, str):
            text = text.strip()
            if text and "\n" not in text and len(text.encode()) <= MAX_MESSAGE_BYTES:
                return text
    if rule.message and rule.message.strip():
        return rule.message.strip()
    return f"failed rule: {rule.rule.strip()}"
