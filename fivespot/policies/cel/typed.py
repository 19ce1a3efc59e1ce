"""Type-check a CRD rule against the schema of the node it is attached to, as the API server does.

The engine declares `self` as `dyn`, which is right for evaluation but lets through rules the API
server refuses at CRD write time: it types `self` from the schema, so `self.matches(...)` on a
`format: date` string (a CEL timestamp there) does not compile. This check declares `self` and
`oldSelf` with the type the schema gives the node, objects as `map(string, dyn)` (so a rule's own
field selections are still checked one level deep, and deeper ones stay dynamic), and reports
what the API server would. Cross-type numeric comparisons are allowed, as Kubernetes allows them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from cel_expr_python import cel

from fivespot.policies.cel import library
from fivespot.policies.cel.engine import (
    _COMPILE_LOCK,
    EXTENSIONS,
    CelCompileError,
    _only_cross_type_comparisons,
    _strip_status,
)

TIMESTAMP = "google.protobuf.Timestamp"
DURATION = "google.protobuf.Duration"


def cel_type(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The CEL type (as an env-config type description) the API server gives a schema node."""
    if schema.get("x-kubernetes-int-or-string") or schema.get("x-kubernetes-preserve-unknown-fields"):
        if "properties" not in schema and "items" not in schema:
            return {"type_name": "dyn"}
    kind = schema.get("type")
    if kind == "string":
        fmt = schema.get("format")
        if fmt in ("date", "date-time"):
            return {"type_name": TIMESTAMP}
        if fmt == "duration":
            return {"type_name": DURATION}
        if fmt == "byte":
            return {"type_name": "bytes"}
        return {"type_name": "string"}
    if kind == "integer":
        return {"type_name": "int"}
    if kind == "number":
        return {"type_name": "double"}
    if kind == "boolean":
        return {"type_name": "bool"}
    if kind == "array":
        return {"type_name": "list", "params": [cel_type(schema.get("items", {}))]}
    if kind == "object":
        additional = schema.get("additionalProperties")
        value = cel_type(additional) if isinstance(additional, Mapping) and "properties" not in schema \
            else {"type_name": "dyn"}
        return {"type_name": "map", "params": [{"type_name": "string"}, value]}
    return {"type_name": "dyn"}


def _type_yaml(description: Mapping[str, Any], indent: str) -> list[str]:
    lines = [f'{indent}type_name: "{description["type_name"]}"']
    if description.get("params"):
        lines.append(f"{indent}params:")
        for param in description["params"]:
            sub = _type_yaml(param, indent + "    ")
            lines.append(f"{indent}  - " + sub[0].lstrip())
            lines += sub[1:]
    return lines


@functools.lru_cache(maxsize=256)
def _environment(self_type: str, optional_old_self: bool) -> cel.Env:
    description = json.loads(self_type)
    lines = ["extensions:"] + [f'  - name: "{name}"' for name in EXTENSIONS] + ["variables:"]
    lines += ['  - name: "self"'] + _type_yaml(description, "    ")
    lines += ['  - name: "oldSelf"']
    if optional_old_self:
        lines += ['    type_name: "optional_type"', "    params:"]
        lines += ["      - " + _type_yaml(description, "        ")[0].lstrip()]
        lines += _type_yaml(description, "        ")[1:]
    else:
        lines += _type_yaml(description, "    ")
    with _COMPILE_LOCK:
        config = cel.NewEnvConfigFromYaml("\n".join(lines) + "\n")
        return cel.NewEnv(config=config, extensions=[library.extension()])


def check_rule_types(rule: str, self_schema: Mapping[str, Any], *, optional_old_self: bool = False
                     ) -> None:
    """Raise CelCompileError when the API server's typed environment would refuse `rule`."""
    env = _environment(json.dumps(cel_type(self_schema), sort_keys=True), optional_old_self)
    with _COMPILE_LOCK:
        try:
            env.compile(rule)
        except RuntimeError as error:
            message = _strip_status(str(error))
            if not _only_cross_type_comparisons(message):
                raise CelCompileError(message, rule) from None
