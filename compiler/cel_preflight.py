"""Every CEL expression the compiler emits is compiled and priced before anything is written.

CRD rules are compiled as the API server compiles them (with `self` typed from the schema) and their cost is estimated the way it
estimates them (per rule 10,000,000, per CRD 100,000,000), so a rule the API server would refuse
at apply time fails the build instead, naming the rule and the bound to add. VAP validations,
message expressions, variables and match conditions are compiled with the admission variables.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from compiler.diagnostics import Diagnostic, Location, field_path
from compiler.emit.base import Artifact
from compiler.repo import Repo
from policies.cel import (
    ADMISSION_VARIABLES,
    PER_CRD_LIMIT,
    PER_RULE_LIMIT,
    CelCompileError,
    budget_violation,
    compile_crd_rule,
    compile_expression,
    estimate_cost,
)
from policies.cel.cost import MAX_REQUEST_SIZE_BYTES
from policies.cel.typed import check_rule_types

SchemaPath = tuple[str | int, ...]


def check(repo: Repo, artifacts: list[Artifact]) -> list[Diagnostic]:
    problems: list[Diagnostic] = []
    for artifact in artifacts:
        if artifact.kind == "CustomResourceDefinition":
            problems += _check_crd(repo, artifact)
        elif artifact.kind == "ValidatingAdmissionPolicy":
            problems += _check_policy(artifact)
    return problems


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


def _check_crd(repo: Repo, artifact: Artifact) -> list[Diagnostic]:
    problems: list[Diagnostic] = []
    crd_name = artifact.name
    kind = artifact.obj["spec"]["names"]["kind"]
    for version in artifact.obj["spec"]["versions"]:
        root = version["schema"]["openAPIV3Schema"]
        total = 0
        for path, node, index, cardinality, rule in _rules(root, (), 1):
            where, shown = _locate(repo, kind, crd_name, path, index)
            expression = rule["rule"]
            try:
                optional = bool(rule.get("optionalOldSelf"))
                compile_crd_rule(expression, optional_old_self=optional)
                check_rule_types(expression, node, optional_old_self=optional)
                if "messageExpression" in rule:
                    compile_expression(rule["messageExpression"], ("self", "oldSelf"))
                estimate = estimate_cost(expression, node, root_is_object=node is root)
            except CelCompileError as error:
                problems.append(Diagnostic(where, shown, f"CEL rule {expression!r} does not compile: "
                                                         f"{error.message}"))
                continue
            violation = budget_violation(estimate, PER_RULE_LIMIT)
            if violation:
                problems.append(Diagnostic(where, shown, f"CEL rule {expression!r}: {violation} "
                                                         f"(estimated cost {estimate.max:,})"))
            total += min(estimate.max * cardinality, 2**64 - 1)
        if total > PER_CRD_LIMIT:
            problems.append(Diagnostic(
                Location(artifact.path, 1, 1), "spec.versions",
                f"CRD {crd_name}: x-kubernetes-validations estimated rule cost total for entire "
                f"OpenAPIv3 schema exceeds budget by factor of {total / PER_CRD_LIMIT:.1f}x "
                "(add maxItems, maxProperties and maxLength)"))
    return problems


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


def _check_policy(artifact: Artifact) -> list[Diagnostic]:
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
        except CelCompileError as error:
            problems.append(Diagnostic(where, field, f"CEL expression {expression!r} does not "
                                                     f"compile: {error.message}"))
    return problems
