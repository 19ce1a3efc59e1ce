"""Every CEL expression the compiler emits is compiled and priced before anything is written.

CRD rules are compiled as the API server compiles them (with `self` typed from the schema) and their cost is estimated the way it
estimates them (per rule 10,000,000, per CRD 100,000,000), so a rule the API server would refuse
at apply time fails the build instead, naming the rule and the bound to add. VAP validations,
message expressions, variables and match conditions are compiled with the admission variables.

The output targets a range of Kubernetes versions (Platform `minKubernetesVersion` to
`maxKubernetesVersion`): a rule is priced as each targeted API server prices it (their estimators
differ; fivespot/policies/kubeversions.py) and refused naming the versions that would refuse it, and an
expression may call only the CEL libraries every targeted version offers new expressions.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fivespot.compiler.diagnostics import Diagnostic, Location, field_path
from fivespot.compiler.emit.base import Artifact
from fivespot.compiler.repo import Repo
from fivespot.policies.cel import (
    ADMISSION_VARIABLES,
    CRD_VARIABLES,
    PER_CRD_LIMIT,
    PER_RULE_LIMIT,
    CelCompileError,
    budget_violation,
    compile_crd_rule,
    compile_expression,
    estimate_cost,
)
from fivespot.policies.cel import checked
from fivespot.policies.cel.cost import MAX_REQUEST_SIZE_BYTES, CostEstimate
from fivespot.policies.cel.typed import check_rule_types
from fivespot.policies.kubeversions import CEL_LIBRARIES, KubernetesVersion

SchemaPath = tuple[str | int, ...]


def check(repo: Repo, artifacts: list[Artifact]) -> list[Diagnostic]:
    targets = repo.platform.spec.kubernetes_versions()
    problems: list[Diagnostic] = []
    for artifact in artifacts:
        if artifact.kind == "CustomResourceDefinition":
            problems += _check_crd(repo, artifact, targets)
        elif artifact.kind == "ValidatingAdmissionPolicy":
            problems += _check_policy(artifact, targets)
    return problems


def _estimators(targets: tuple[KubernetesVersion, ...]) -> list[tuple[KubernetesVersion, ...]]:
    """The targeted versions grouped by how they estimate cost: one estimate per group."""
    groups: dict[bool, list[KubernetesVersion]] = {}
    for version in targets:
        groups.setdefault(version.metadata_name_cost_cap, []).append(version)
    return [tuple(group) for group in groups.values()]


def _on(versions: tuple[KubernetesVersion, ...], targets: tuple[KubernetesVersion, ...]) -> str:
    """`Kubernetes 1.34, 1.35 and 1.36 would refuse it (1.37 accepts it): `: who refuses, and who
    would not; nothing when every targeted version refuses."""
    if len(versions) == len(targets):
        return ""
    refusing = [v.minor for v in versions]
    named = refusing[0] if len(refusing) == 1 else ", ".join(refusing[:-1]) + " and " + refusing[-1]
    accepting = [v.minor for v in targets if v not in versions]
    verb = "accepts" if len(accepting) == 1 else "accept"
    return f"Kubernetes {named} would refuse it ({', '.join(accepting)} {verb} it): "


def missing_libraries(expression: str, variables: frozenset[str],
                      targets: tuple[KubernetesVersion, ...]) -> list[str]:
    """Why `expression` cannot be written to some targeted API server: each CEL library it calls
    that one of them does not offer new expressions. Raises CelCompileError."""
    tree = compile_expression(expression, variables).tree
    called = {node.function for node in checked.walk(tree.root) if isinstance(node, checked.Call)}
    found = []
    for library in CEL_LIBRARIES:
        used = sorted(called & library.functions)
        lacking = tuple(v for v in targets if not library.offered_by(v))
        if used and lacking:
            names = ", ".join(_function_name(f) + "()" for f in used)
            refusing = ", ".join(v.minor for v in lacking)
            found.append(f"calls {names} of {library.name}, which the API server offers new "
                         f"expressions from Kubernetes {library.first_minor} on: Kubernetes "
                         f"{refusing} would refuse it (raise minKubernetesVersion to "
                         f"{library.first_minor}, or do without it)")
    return found


def _function_name(function: str) -> str:
    return "sortBy" if function == "@sortByAssociatedKeys" else function


def _rules(schema: dict[str, Any], path: SchemaPath, cardinality: int
           ) -> Iterator[tuple[SchemaPath, dict[str, Any], int, int, dict[str, Any]]]:
    """(schema path, node, rule index, cardinality, rule) for every rule under `schema`."""
    for index, rule in enumerate(schema.get("x-kubernetes-validations", [])):
        yield path, schema, index, cardinality, rule
    for name, child in sorted(schema.get("properties", {}).items()):
        yield from _rules(child, path + ("properties", name), cardinality)
    if "items" in schema:
        yield from _rules(schema["items"], path + ("items",),
                          cardinality * _bound(schema, "maxItems"))
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _rules(schema["additionalProperties"], path + ("additionalProperties",),
                          cardinality * _bound(schema, "maxProperties"))


def _bound(schema: dict[str, Any], keyword: str) -> int:
    value = schema.get(keyword)
    return int(value) if value is not None else MAX_REQUEST_SIZE_BYTES // 2


def _check_crd(repo: Repo, artifact: Artifact, targets: tuple[KubernetesVersion, ...]
               ) -> list[Diagnostic]:
    problems: list[Diagnostic] = []
    crd_name = artifact.name
    kind = artifact.obj["spec"]["names"]["kind"]
    estimators = _estimators(targets)
    for version in artifact.obj["spec"]["versions"]:
        root = version["schema"]["openAPIV3Schema"]
        totals = [0] * len(estimators)
        for path, node, index, cardinality, rule in _rules(root, (), 1):
            where, shown = _locate(repo, kind, crd_name, path, index)
            expression = rule["rule"]
            try:
                optional = bool(rule.get("optionalOldSelf"))
                compile_crd_rule(expression, optional_old_self=optional)
                check_rule_types(expression, node, optional_old_self=optional)
                lacking = missing_libraries(expression, CRD_VARIABLES, targets)
                if "messageExpression" in rule:
                    compile_expression(rule["messageExpression"], ("self", "oldSelf"))
                    lacking += missing_libraries(rule["messageExpression"], CRD_VARIABLES, targets)
                # the root, and each embedded resource, declare apiVersion, kind and metadata
                resource = node is root or bool(node.get("x-kubernetes-embedded-resource"))
                estimates = [estimate_cost(expression, node, root_is_object=resource,
                                           server=group[0]) for group in estimators]
            except CelCompileError as error:
                problems.append(Diagnostic(where, shown, f"CEL rule {expression!r} does not compile: "
                                                         f"{error.message}"))
                continue
            problems += [Diagnostic(where, shown, f"CEL rule {expression!r} {why}") for why in lacking]
            problems += _over_budget(where, shown, expression, estimators, estimates, targets)
            for i, estimate in enumerate(estimates):
                totals[i] += min(estimate.max * cardinality, 2**64 - 1)
        refusing = tuple(v for group, total in zip(estimators, totals) if total > PER_CRD_LIMIT
                         for v in group)
        if refusing:
            total = max(totals)
            problems.append(Diagnostic(
                Location(artifact.path, 1, 1), "spec.versions",
                f"CRD {crd_name}: {_on(refusing, targets)}x-kubernetes-validations estimated rule "
                f"cost total for entire OpenAPIv3 schema exceeds budget by factor of "
                f"{total / PER_CRD_LIMIT:.1f}x (add maxItems, maxProperties and maxLength)"))
    return problems


def _over_budget(where: Location, shown: str, expression: str,
                 estimators: list[tuple[KubernetesVersion, ...]], estimates: list[CostEstimate],
                 targets: tuple[KubernetesVersion, ...]) -> list[Diagnostic]:
    """One error for a rule some targeted API servers would refuse, with the estimate of the
    first of them, naming them all (and those that would accept it)."""
    refusing = [(group, estimate) for group, estimate in zip(estimators, estimates)
                if budget_violation(estimate, PER_RULE_LIMIT)]
    if not refusing:
        return []
    versions = tuple(v for group, _ in refusing for v in group)
    estimate = refusing[0][1]
    violation = budget_violation(estimate, PER_RULE_LIMIT)
    return [Diagnostic(where, shown, f"CEL rule {expression!r}: {_on(versions, targets)}{violation} "
                                     f"(estimated cost {estimate.max:,})")]


def _locate(repo: Repo, kind: str, crd_name: str, path: SchemaPath, index: int
            ) -> tuple[Location, str]:
    """Where a rule came from: the user's own declaration for custom providers, else the CRD."""
    shown = _schema_field(path)
    source = repo.custom_provider_sources.get(kind)
    if source is not None and path[:2] == ("properties", "spec"):
        document, prefix = source
        inner = prefix + ("specSchema",) + path[2:] + ("x-kubernetes-validations", index, "rule")
        return document.locate(inner), field_path(inner)
    return Location(f"crds/{crd_name}.yaml", 0, 0), f"{shown}.x-kubernetes-validations[{index}]"


def _schema_field(path: SchemaPath) -> str:
    parts = [p for p in path if p not in ("properties", "additionalProperties")]
    return field_path([("[*]" if p == "items" else p) for p in parts]).replace(".[*]", "[*]")


def _check_policy(artifact: Artifact, targets: tuple[KubernetesVersion, ...]) -> list[Diagnostic]:
    spec = artifact.obj["spec"]
    where = Location(artifact.path, 0, 0)
    expressions: list[tuple[str, str]] = []
    for i, variable in enumerate(spec.get("variables", [])):
        expressions.append((f"spec.variables[{i}].expression", variable["expression"]))
    for i, condition in enumerate(spec.get("matchConditions", [])):
        expressions.append((f"spec.matchConditions[{i}].expression", condition["expression"]))
    for i, validation in enumerate(spec.get("validations", [])):
        expressions.append((f"spec.validations[{i}].expression", validation["expression"]))
        if "messageExpression" in validation:
            expressions.append((f"spec.validations[{i}].messageExpression",
                                validation["messageExpression"]))
    problems = []
    for field, expression in expressions:
        try:
            compile_expression(expression, ADMISSION_VARIABLES)
            lacking = missing_libraries(expression, ADMISSION_VARIABLES, targets)
        except CelCompileError as error:
            problems.append(Diagnostic(where, field, f"CEL expression {expression!r} does not "
                                                     f"compile: {error.message}"))
            continue
        problems += [Diagnostic(where, field, f"CEL expression {expression!r} {why}")
                     for why in lacking]
    return problems
