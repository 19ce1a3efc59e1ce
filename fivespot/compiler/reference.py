"""The field-by-field reference of every config kind and cluster kind (`docs/reference/kinds.md`).

Generated, never hand-written: the config kinds' fields come from the pydantic models the loader
validates with (`fivespot.compiler.spec`), the cluster kinds' from the very structural schemas their CRDs
carry (`fivespot.compiler.emit.crds`), each with its type, default, bounds and description. The YAML
examples are the `fivespot init` scaffold (compiled and tested by the suite) and
`CLUSTER_EXAMPLES` (checked by the suite against the compiled CRDs and policies). A unit test
fails when the committed page differs from what this module renders: `make reference` renews it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import yaml
from pydantic import BaseModel

from fivespot.compiler.emit.crds import (
    SCHEDULED_CAPACITY,
    SCHEDULED_MACHINE,
    TENANT_LIMIT,
    KindInfo,
    builtin_provider,
)
from fivespot.compiler.scaffold import CONSUMERS, FIXTURES, PLATFORM, PROVIDERS, TENANTS
from fivespot.api.providers import BuiltinProvider
from fivespot.compiler.spec import CONFIG_API_VERSION, DOCUMENT_KINDS

MACHINES: Final = """\
# Optional, at most one per repo: fivespot then reconciles ScheduledMachines (Cluster API).
apiVersion: config.5spot.finos.org/v1alpha1
kind: MachineProvisioning
metadata:
  name: capi
spec:
  clusters:                        # the CAPI Clusters machines may join
    - {namespace: trading, name: desk-cluster}
  bootstrap:                       # the bootstrap kinds a ScheduledMachine may embed
    - {group: bootstrap.cluster.x-k8s.io, version: v1beta2, kind: KubeadmConfig, resource: kubeadmconfigs}
  infrastructure:                  # and the infrastructure kinds
    - {group: infrastructure.cluster.x-k8s.io, version: v1beta2, kind: DevMachine, resource: devmachines}
"""

CONFIG_EXAMPLES: Final = {
    "Platform": PLATFORM, "CapacityConsumer": CONSUMERS, "ScheduleProvider": PROVIDERS,
    "TenantPolicy": TENANTS, "Fixture": FIXTURES.split("\n---\n")[0] + "\n",
    "MachineProvisioning": MACHINES,
}

CLUSTER_EXAMPLES: Final = {
    "ScheduledCapacity": """\
apiVersion: 5spot.finos.org/v1alpha1
kind: ScheduledCapacity
metadata: {name: web, namespace: team-a}
spec:
  schedule: {apiVersion: spotschedules.5spot.finos.org/v1alpha1, kind: TimeBasedSpotSchedule, name: office-hours}
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  capacity: {path: spec.replicas, activeValue: 3}
  handback: {drainedPath: status.readyReplicas, timeout: 15m}
""",
    "ManualSchedule": """\
apiVersion: spotschedules.5spot.finos.org/v1alpha1
kind: ManualSchedule
metadata: {name: web, namespace: team-a}
spec:
  enabled: true
""",
    "TimeBasedSpotSchedule": """\
apiVersion: spotschedules.5spot.finos.org/v1alpha1
kind: TimeBasedSpotSchedule
metadata: {name: office-hours, namespace: team-a}
spec:
  timezone: Europe/London
  daysOfWeek: [mon-fri]
  hoursOfDay: [9-17]
""",
    "CapitalMarketsSchedule": """\
apiVersion: spotschedules.5spot.finos.org/v1alpha1
kind: CapitalMarketsSchedule
metadata: {name: nyse, namespace: team-a}
spec:
  timezone: America/New_York
  sessions: [{days: mon-fri, open: "09:30", close: "16:00"}]
  holidays: ["2026-12-25"]
  earlyCloses: [{date: "2026-11-27", close: "13:00"}]
""",
    "ScheduledMachine": """\
apiVersion: 5spot.finos.org/v1beta1
kind: ScheduledMachine
metadata: {name: gpu-1, namespace: team-a}
spec:
  schedule: {apiVersion: spotschedules.5spot.finos.org/v1alpha1, kind: ManualSchedule, name: gpu}
""",
}
"""One object per cluster kind a tenant writes; the suite checks each against the compiled output."""


def cluster_kinds() -> list[KindInfo]:
    return [SCHEDULED_CAPACITY, *(builtin_provider(k) for k in BuiltinProvider), SCHEDULED_MACHINE,
            TENANT_LIMIT]


# --- walking a schema ----------------------------------------------------------------------------


def _type(node: dict[str, Any]) -> str:
    kind = str(node.get("type", "any"))
    if kind == "array":
        return f"[]{_type(node.get('items') or {})}"
    extra = node.get("additionalProperties")
    if kind == "object" and isinstance(extra, dict) and "properties" not in node:
        return f"map[string]{_type(extra)}"
    if node.get("x-kubernetes-int-or-string"):
        return "int or string"
    return kind


def _constraints(node: dict[str, Any]) -> list[str]:
    found = []
    if "enum" in node:
        found.append("one of " + ", ".join(f"`{v}`" for v in node["enum"]))
    for key, word in (("minimum", "≥"), ("maximum", "≤"), ("minLength", "length ≥"),
                      ("maxLength", "length ≤"), ("minItems", "items ≥"), ("maxItems", "items ≤")):
        if key in node:
            found.append(f"{word} {node[key]}")
    if "pattern" in node:
        found.append(f"pattern `{node['pattern']}`")
    for rule in node.get("x-kubernetes-validations") or []:
        found.append(f"rule: {rule.get('message') or rule['rule']}")
    return found


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def rows(node: dict[str, Any], prefix: str) -> Iterator[tuple[str, str, str, str, str]]:
    """(field, type, required, default, description) for every field under `node`."""
    required = set(node.get("required") or [])
    for name, child in sorted((node.get("properties") or {}).items()):
        path = f"{prefix}.{name}" if prefix else name
        default = f"`{_yaml_inline(child['default'])}`" if child.get("default") is not None else ""
        description = " ".join([child.get("description", "").strip(), *(
            f"({c})" for c in _constraints(child))]).strip()
        yield (f"`{path}`", f"`{_type(child)}`", "yes" if name in required else "",
               _cell(default), _cell(description))
        target = child.get("items") if child.get("type") == "array" else child
        if isinstance(target, dict) and target.get("properties"):
            yield from rows(target, path + ("[]" if child.get("type") == "array" else ""))


def config_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A config model's JSON Schema with `$ref`s inlined, for the tables. A model that contains
    itself (a custom provider's specSchema is an OpenAPI schema of schemas) is shown once and
    named where it recurs, instead of being expanded forever."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return _inline(raw, raw.pop("$defs", {}), ())


def _inline(node: dict[str, Any], defs: dict[str, Any], stack: tuple[str, ...]) -> dict[str, Any]:
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        extra = {k: v for k, v in node.items() if k != "$ref"}
        if name in stack:
            return {"type": "object", **extra,
                    "description": (extra.get("description", "") + f" (a {name}, as above)").strip()}
        return {**_inline(defs[name], defs, (*stack, name)), **extra}
    options = [o for o in node.get("anyOf") or [] if o.get("type") != "null"]
    if "anyOf" in node:
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        if len(options) == 1:
            return {**_inline(options[0], defs, stack), **rest}
        return {**rest, "type": " or ".join(sorted({str(_inline(o, defs, stack).get("type", "any"))
                                                    for o in options}))}
    found = dict(node)
    if "const" in found:
        found.setdefault("enum", [found.pop("const")])
    if "properties" in found:
        found["properties"] = {k: _inline(v, defs, stack) for k, v in found["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(found.get(key), dict):
            found[key] = _inline(found[key], defs, stack)
    return found


def _yaml_inline(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=1000).strip().removesuffix("...").strip()


def _table(schema: dict[str, Any], prefix: str) -> list[str]:
    lines = ["| field | type | required | default | description |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows(schema, prefix)]
    return lines


# --- the page ----------------------------------------------------------------------------------


def _config_section(kind: str) -> list[str]:
    model = DOCUMENT_KINDS[kind]
    spec_model = model.model_fields["spec"].annotation
    assert isinstance(spec_model, type)
    doc = " ".join((spec_model.__doc__ or model.__doc__ or "").split())
    lines = [f"### {kind}", ""]
    if doc:
        lines += [doc, ""]
    lines += [f"`apiVersion: {CONFIG_API_VERSION}`, `kind: {kind}`, `metadata.name` required.", ""]
    lines += _table(config_schema(spec_model), "spec") + [""]
    lines += ["```yaml", CONFIG_EXAMPLES[kind].rstrip("\n"), "```", ""]
    return lines


def _cluster_section(info: KindInfo) -> list[str]:
    short = f", short name{'s' if len(info.short_names) > 1 else ''} " + ", ".join(
        f"`{s}`" for s in info.short_names) if info.short_names else ""
    lines = [f"### {info.kind}", "", " ".join(info.description.split()), "",
             f"`apiVersion: {info.group}/{info.version}`, {info.scope.lower()}{short}; "
             f"CRD `{info.name}`.", ""]
    lines += _table(info.spec, "spec")
    if info.status:
        lines += ["", "Written by its controller, read-only to everyone else:", ""]
        lines += _table(info.status, "status")
    lines.append("")
    if info.kind in CLUSTER_EXAMPLES:
        lines += ["```yaml", CLUSTER_EXAMPLES[info.kind].rstrip("\n"), "```", ""]
    else:
        lines += ["Compiled from TenantPolicy documents (`admission/params/`); nobody writes it "
                  "by hand.", ""]
    return lines


def render() -> str:
    lines = [
        "# fivespot reference",
        "",
        "<!-- Generated by `make reference` (fivespot/compiler/reference.py) from the models; do not edit. -->",
        "",
        "Every field of every kind, with its type, default, bounds and meaning. Field paths use",
        "`[]` for list items. JSON Schemas of the config kinds, for editors: `fivespot schema`.",
        "",
        f"## Config kinds (`{CONFIG_API_VERSION}`)",
        "",
        "Documents of a config repo, read by `fivespot compile` and `fivespot test`.",
        "",
    ]
    for kind in DOCUMENT_KINDS:
        lines += _config_section(kind)
    lines += ["## Cluster kinds", "",
              "The custom resources the compiled CRDs define, as tenants and controllers use them.", ""]
    for info in cluster_kinds():
        lines += _cluster_section(info)
    return "\n".join(lines).rstrip("\n") + "\n"
