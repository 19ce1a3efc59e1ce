"""Pydantic models -> Kubernetes structural OpenAPI v3 schemas (flattened, no `$ref`).

CRD schemas must be structural: every node typed, no `$ref`, no `anyOf` for optionals, no
`additionalProperties: false` next to `properties`, no `uniqueItems`. Pydantic's JSON Schema is
close; this module closes the gap, keeping descriptions, bounds, patterns and the
`x-kubernetes-validations` rules the models carry.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from fivespot.policies.admission_eval.structural import json_type

_DROP = {"title", "additionalProperties", "uniqueItems", "examples"}


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural schema of `model`, as CRDs and the offline checker consume it."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    definitions = raw.pop("$defs", {})
    return _convert(raw, definitions)


def _resolve(node: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """Inline `$ref` and single-entry `allOf`, letting the referring node's keys win."""
    if "$ref" in node:
        target = definitions[node["$ref"].rsplit("/", 1)[-1]]
        merged = dict(_resolve(target, definitions))
        merged.update({k: v for k, v in node.items() if k != "$ref"})
        return merged
    if "allOf" in node and len(node["allOf"]) == 1:
        merged = dict(_resolve(node["allOf"][0], definitions))
        merged.update({k: v for k, v in node.items() if k != "allOf"})
        return merged
    return node


def _without_null(node: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """`X | None` is an optional field in Kubernetes, not a nullable one."""
    for key in ("anyOf", "oneOf"):
        options = node.get(key)
        if not options:
            continue
        kept = [o for o in options if o.get("type") != "null"]
        if len(kept) == 1:
            merged = dict(_resolve(kept[0], definitions))
            merged.update({k: v for k, v in node.items() if k != key})
            if merged.get("default", "") is None:
                merged.pop("default")
            return merged
    return node


def _convert(node: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    node = _without_null(_resolve(node, definitions), definitions)
    node = _resolve(node, definitions)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP:
            continue
        if key == "properties":
            out["properties"] = {name: _convert(child, definitions) for name, child in value.items()}
        elif key == "items":
            out["items"] = _convert(value, definitions)
        elif key == "const":
            out["enum"] = [value]
        elif key in ("anyOf", "oneOf"):
            raise ValueError(f"unions other than `X | None` cannot be structural: {value}")
        else:
            out[key] = value
    if "enum" in out and "type" not in out:
        out["type"] = json_type(out["enum"][0])
    additional = node.get("additionalProperties")
    if "properties" not in out and isinstance(additional, dict):
        if additional:
            out["additionalProperties"] = _convert(additional, definitions)
        else:
            out["x-kubernetes-preserve-unknown-fields"] = True
    if out.get("type") == "object" and "properties" not in out and "additionalProperties" not in out:
        out["x-kubernetes-preserve-unknown-fields"] = True
    if "type" not in out and "x-kubernetes-preserve-unknown-fields" not in out:
        out["x-kubernetes-preserve-unknown-fields"] = True
    if out.get("required"):
        out["required"] = sorted(out["required"])
    return out
