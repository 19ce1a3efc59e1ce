"""`fivespot schema`: JSON Schemas of the config kinds, for editors and CI linters.

Generated from the same pydantic models the loader validates with, so an editor flags what
`fivespot compile` would refuse (within what JSON Schema can say: cross-document rules such as
"a TenantPolicy names an existing consumer" are the compiler's). `fivespot-config.schema.json`
takes any config document and picks the kind's schema by `kind`, which is what a multi-document
file or a folder mixing kinds needs; one file per kind is written too. Editors using the YAML
language server (VS Code's YAML extension, Neovim, Helix...) read a first line
`# yaml-language-server: $schema=PATH`.
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from fivespot.compiler.spec import CONFIG_API_VERSION, DOCUMENT_KINDS

DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"
COMBINED: Final = "fivespot-config.schema.json"


def _combined() -> dict[str, Any]:
    models: list[tuple[type[BaseModel], Literal["validation"]]] = [
        (model, "validation") for model in DOCUMENT_KINDS.values()]
    refs, schema = models_json_schema(models, by_alias=True, ref_template="#/$defs/{model}")
    branches = [{"if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]},
                 "then": refs[(model, "validation")]}
                for kind, model in DOCUMENT_KINDS.items()]
    return {
        "$schema": DIALECT,
        "title": f"fivespot config document ({CONFIG_API_VERSION})",
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {"apiVersion": {"const": CONFIG_API_VERSION},
                       "kind": {"enum": list(DOCUMENT_KINDS)}},
        "allOf": branches,
        "$defs": schema["$defs"],
    }


def _single(kind: str) -> dict[str, Any]:
    model = DOCUMENT_KINDS[kind]
    return {"$schema": DIALECT, **model.model_json_schema(by_alias=True, mode="validation")}


def _render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def schema_files() -> dict[str, str]:
    """File name -> JSON text: the combined schema and one per kind (`platform.schema.json`...)."""
    files = {COMBINED: _render(_combined())}
    for kind in DOCUMENT_KINDS:
        files[f"{kind.lower()}.schema.json"] = _render(_single(kind))
    return files
