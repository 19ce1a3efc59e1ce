"""OUT_DIR/README.md: what the output installs, every CRD field, every policy with its message,
and an RBAC matrix (identity x resource x verbs) — the page a reviewer reads in a pull request.
Everything in it is read back from the emitted objects, so it cannot describe something else.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

import jinja2

from fivespot.compiler.emit.base import SYNC_WAVES, Artifact
from fivespot.compiler.emit.gitops import (
    ARGOCD_CM_APPLY,
    ARGOCD_CMD_PARAMS_APPLY,
    ARGOCD_CMD_PARAMS_FILE,
    SELF_HEAL_TIMEOUT_S,
    argocd_controller_restart,
)
from fivespot.compiler.repo import Repo

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("fivespot.compiler", "templates"),
    autoescape=False,
    keep_trailing_newline=True,
    trim_blocks=True,
    lstrip_blocks=True,
    undefined=jinja2.StrictUndefined,
)


@dataclass(frozen=True)
class FieldRow:
    path: str
    type: str
    required: bool
    constraints: str
    description: str


def _cell(text: str) -> str:
    """User text (a description, a message) as Markdown text on one line, in a table cell or
    not: `<`, `>` and `&` as entities, so none of it is read as HTML (a `<!--` would hide the
    sections after it from a reviewer reading the rendered page), `|` escaped."""
    return html.escape(" ".join(str(text).split()), quote=False).replace("|", "\\|")


def _code(text: str, in_table: bool = False) -> str:
    """User text (a rule, a field path) as one Markdown code span, whose content is shown as
    it is: delimited by one backtick more than its longest run, so no backtick in it ends the
    span early and lets what follows be read as Markdown or HTML. `|` is escaped only in a
    table cell, where GitHub's tables take it out before the span is read."""
    text = " ".join(str(text).split())
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    span = f"{fence}{padded}{fence}"
    return span.replace("|", "\\|") if in_table else span


def _constraints(schema: dict[str, Any]) -> str:
    keys = ("enum", "pattern", "minimum", "maximum", "minLength", "maxLength", "minItems",
            "maxItems", "format", "default")
    parts = []
    for key in keys:
        if key in schema:
            value = schema[key]
            shown = ", ".join(map(str, value)) if isinstance(value, list) else value
            parts.append(f"{key}: {_code(str(shown), in_table=True)}")
    return "; ".join(parts)


def _type(schema: dict[str, Any]) -> str:
    kind = schema.get("type", "any")
    if kind == "array":
        return f"[]{schema.get('items', {}).get('type', 'any')}"
    return str(kind)


def _fields(schema: dict[str, Any], prefix: str, required: bool) -> list[FieldRow]:
    rows = [FieldRow(_code(prefix, in_table=True), _cell(_type(schema)), required,
                     _constraints(schema), _cell(schema.get("description", "")))] if prefix else []
    needed = set(schema.get("required", []))
    for name, child in schema.get("properties", {}).items():
        rows += _fields(child, f"{prefix}.{name}" if prefix else name, name in needed)
    if "items" in schema and schema["items"].get("properties"):
        rows += _fields(schema["items"], f"{prefix}[*]", False)[1:]
    return rows


def _rules(schema: dict[str, Any], prefix: str) -> list[dict[str, str]]:
    found = [{"path": _code(prefix or "(object)"), "rule": _code(r["rule"]),
              "message": _cell(r.get("message", ""))}
             for r in schema.get("x-kubernetes-validations", [])]
    for name, child in schema.get("properties", {}).items():
        found += _rules(child, f"{prefix}.{name}" if prefix else name)
    if "items" in schema:
        found += _rules(schema["items"], f"{prefix}[*]")
    return found


def _crd_view(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj["spec"]
    version = spec["versions"][0]
    root = version["schema"]["openAPIV3Schema"]
    body = {"type": "object", "properties": {k: v for k, v in root["properties"].items()
                                             if k in ("spec", "status")},
            "required": root.get("required", [])}
    return {
        "kind": spec["names"]["kind"], "group": spec["group"], "version": version["name"],
        "short_names": spec["names"].get("shortNames", []),
        "description": _cell(root.get("description", "")),
        "fields": _fields(body, "", False), "rules": _rules(body, ""),
    }


def _policy_views(artifacts: list[Artifact]) -> list[dict[str, Any]]:
    bindings: dict[str, list[dict[str, Any]]] = {}
    for a in artifacts:
        if a.kind == "ValidatingAdmissionPolicyBinding":
            selector = a.obj["spec"].get("matchResources", {}).get("namespaceSelector", {})
            namespaces = [v for e in selector.get("matchExpressions", []) for v in e["values"]]
            bindings.setdefault(a.obj["spec"]["policyName"], []).append(
                {"name": a.name, "actions": a.obj["spec"]["validationActions"],
                 "namespaces": namespaces})
    return [{
        "name": a.name,
        "validations": [{"expression": _code(v["expression"]),
                         "message": _code(v.get("messageExpression", v.get("message", "")))}
                        for v in a.obj["spec"]["validations"]],
        "bindings": bindings.get(a.name, []),
    } for a in artifacts if a.kind == "ValidatingAdmissionPolicy"]


def _rbac_rows(artifacts: list[Artifact]) -> list[dict[str, str]]:
    roles = {(a.kind, a.obj["metadata"].get("namespace"), a.name): a.obj
             for a in artifacts if a.kind in ("ClusterRole", "Role")}
    rows = []
    for a in artifacts:
        if a.kind not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        ref = a.obj["roleRef"]
        role_ns = a.obj["metadata"].get("namespace") if ref["kind"] == "Role" else None
        role = roles.get((ref["kind"], role_ns, ref["name"]))
        if role is None:
            continue
        bound_in = a.obj["metadata"].get("namespace") if a.kind == "RoleBinding" else None
        scope = f"namespace {bound_in}" if bound_in else "cluster"
        for subject in a.obj.get("subjects", []):
            identity = f"{subject.get('namespace', '')}/{subject['name']}"
            for rule in role.get("rules", []):
                for group in rule.get("apiGroups", []):
                    for resource in rule.get("resources", []):
                        rows.append({
                            "identity": identity, "scope": scope, "group": group,
                            "resource": resource,
                            "names": ", ".join(rule.get("resourceNames", [])) or "any",
                            "verbs": ", ".join(rule["verbs"]),
                        })
    return sorted(rows, key=lambda r: (r["identity"], r["scope"], r["group"], r["resource"], r["names"]))


def render(repo: Repo, artifacts: list[Artifact]) -> str:
    return _ENV.get_template("README.md.j2").render(
        namespace=repo.namespace,
        enforcement=repo.platform.spec.enforcement.value,
        has_capacity=repo.has_capacity,
        polyfill=repo.polyfill,
        artifacts=sorted(artifacts, key=lambda a: (list(SYNC_WAVES).index(a.layer), a.path)),
        waves=SYNC_WAVES,
        crds=[_crd_view(a.obj) for a in artifacts if a.kind == "CustomResourceDefinition"],
        policies=_policy_views(artifacts),
        rbac=_rbac_rows(artifacts),
        argocd_cm_apply=ARGOCD_CM_APPLY,
        self_heal=_self_heal_view(repo),
    )


def _self_heal_view(repo: Repo) -> dict[str, str | int] | None:
    """How to put argocd-cmd-params-cm's self-heal keys in force, when the output has them."""
    argo = repo.platform.spec.gitops.argocd
    if argo is None or not argo.fixed_self_heal_timeout:
        return None
    return {"file": ARGOCD_CMD_PARAMS_FILE, "apply": ARGOCD_CMD_PARAMS_APPLY,
            "restart": argocd_controller_restart(argo.namespace), "seconds": SELF_HEAL_TIMEOUT_S}
