"""Custom resources as the API server admits them, before any admission policy sees them.

For a CREATE or UPDATE of a custom resource the server decodes the body (pruning unknown
fields, dropping nulls, defaulting), resets `status` when the CRD has a status subresource (a
create cannot set it; an update keeps the stored one), checks the name, the labels, annotations
and finalizers (`objectmeta`), the structural schema and then the CEL rules. Any error there is
a 422 and validating admission never runs; this module makes the same calls, with precompiled
schemas, and reports the same fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from msgspec import Struct
from msgspec.structs import force_setattr

from fivespot.policies.admission_eval import celrules, objectmeta, pruning, structural, validation
from fivespot.policies.admission_eval.result import CRD_RULE, SCHEMA, Violation
from fivespot.policies.admission_eval.structural import BLOCKED_MESSAGE, BLOCKING, FieldError, Node
from fivespot.policies.cel import ABSENT
from fivespot.policies.kubeversions import KubernetesVersion

class CustomResourceKind(Struct, frozen=True, eq=False):
    """One served version of a CRD, compiled (its schema compiled now, or on first use)."""

    crd_name: str
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    status_subresource: bool
    openapi: Mapping[str, Any]
    """The version's `openAPIV3Schema`, with the root fields (`with_root_fields`)."""
    server: KubernetesVersion
    """The API server version whose validation the compiled schema reproduces."""
    compiled: Node | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def schema(self) -> Node:
        """The compiled schema; raises structural.SchemaError (only when compiled lazily)."""
        if self.compiled is None:
            force_setattr(self, "compiled", compile_schema(self.openapi, server=self.server))
        assert self.compiled is not None
        return self.compiled


class Admitted(Struct, frozen=True):
    """A custom resource after decoding and validation."""

    object: dict[str, Any]
    old_object: dict[str, Any] | None
    violations: tuple[Violation, ...]
    warnings: tuple[str, ...]
    """The decoder's (`unknown field "spec.x"`): what field validation decides on."""
    notices: tuple[str, ...] = ()
    """The warnings the server sends when the object is valid (finalizers it would rather see
    domain-qualified)."""


def compile_crds(crds: Iterable[Mapping[str, Any]], *, lazy: bool = False,
                 server: KubernetesVersion) -> dict[tuple[str, str], CustomResourceKind]:
    """(apiVersion, kind) -> compiled kind, for every served version of every CRD, validated as
    the API server of version `server` validates.

    Raises structural.SchemaError when a rule or pattern does not compile. `lazy`: each schema
    is compiled when it is first used instead, for a caller that knows these very CRDs compiled
    before (`fivespot check`'s cache: a one-object check then compiles one kind of seven).
    """
    kinds: dict[tuple[str, str], CustomResourceKind] = {}
    for crd in crds:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        for version in spec.get("versions") or ():
            if not version.get("served", True):
                continue
            openapi = ((version.get("schema") or {}).get("openAPIV3Schema")) or {
                "type": "object", "x-kubernetes-preserve-unknown-fields": True}
            kind = CustomResourceKind(
                crd_name=str((crd.get("metadata") or {}).get("name", "")),
                group=str(spec.get("group", "")),
                version=str(version.get("name", "")),
                kind=str(names.get("kind", "")),
                plural=str(names.get("plural", "")),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                status_subresource="status" in ((version.get("subresources") or {})),
                openapi=with_root_fields(openapi),
                server=server,
            )
            if not lazy:  # compiled now: a bad rule or pattern is raised here
                _ = kind.schema
            kinds[(kind.api_version, kind.kind)] = kind
    return kinds


def compile_schema(schema: Mapping[str, Any], *, root: bool = True,
                   server: KubernetesVersion) -> Node:
    """An `openAPIV3Schema` compiled (`structural`), with each pass's closure on every node, as
    the API server of version `server` validates.

    Raises structural.SchemaError naming the rule or pattern at fault.
    """
    node = structural.compile_structure(schema, root=root)
    _attach_walks(node, server)
    return node


# `compile_schema` gives every node three closures, built from its children's: `normalise` (prune
# and default), `check` (structural validation) and `check_rules` (the CEL rules). What a walk needs
# about a node (its keywords, its children by name, which subtrees have work) is captured once as
# closure variables, so checking an object is one call per value that has something to do, with
# no schema keyword lookups; values whose normalisation is the identity are stored without a call,
# and subtrees without rules are never walked for rules. The walks make exactly the calls, in the
# same order, that the API server's prune / default / validate / CEL passes make.


def _attach_walks(node: Node, server: KubernetesVersion) -> None:
    """Build the closures of `node` and everything below it, children first."""
    for child in (*(node.properties or {}).values(), node.additional, node.items):
        if child is not None:
            _attach_walks(child, server)
    node.normalise = pruning.build_normaliser(node)
    node.check = validation.build_validator(node, server)
    node.check_rules = celrules.build_rule_walker(node, server) if node.rules_below else None


def with_root_fields(openapi: Mapping[str, Any]) -> dict[str, Any]:
    """apiVersion, kind and metadata are always known at the root, whatever the schema says."""
    root = dict(openapi)
    properties = dict(root.get("properties") or {})
    properties.setdefault("apiVersion", {"type": "string"})
    properties.setdefault("kind", {"type": "string"})
    properties.setdefault("metadata", {"type": "object"})
    root["properties"] = properties
    return root


def admit(kind: CustomResourceKind, operation: str, obj: Mapping[str, Any],
          old: Mapping[str, Any] | None) -> Admitted:
    """Decode and validate `obj` (and, for UPDATE, against `old`) as the API server would."""
    warnings: list[str] = []
    new = pruning.prune_and_default(dict(obj), kind.schema, warnings)
    stored = pruning.prune_and_default(dict(old), kind.schema, []) if old is not None else None
    if kind.status_subresource:
        new.pop("status", None)
        if stored is not None and "status" in stored:
            new["status"] = stored["status"]
    errors: list[FieldError] = []
    errors += _metadata_errors(new, stored, kind.server)
    old_root: Any = stored if stored is not None and operation == "UPDATE" else ABSENT
    validation.validate(new, old_root, kind.schema, "", errors)
    schema_errors = list(errors)
    rule_errors: list[FieldError] = []
    if any(e.type in BLOCKING for e in schema_errors):
        if kind.schema.rules_below:
            # The API server reports this as one more field error, with no field (`<nil>`).
            schema_errors.append(FieldError("", structural.INVALID, f"Invalid value: null: {BLOCKED_MESSAGE}"))
    else:
        celrules.validate_rules(new, old_root, kind.schema, "", rule_errors, root=True,
                                schema_ok=not schema_errors)
    violations = tuple(
        [Violation(SCHEMA, kind.crd_name, e.path or None, e.message, reason=e.type)
         for e in schema_errors]
        + [Violation(CRD_RULE, kind.crd_name, e.path, e.message, reason=e.type) for e in rule_errors]
    )
    notices = () if violations else tuple(objectmeta.warnings(
        new.get("metadata") or {}, (stored or {}).get("metadata") if stored is not None else None,
        kind.server))
    return Admitted(new, stored, violations, tuple(warnings), notices)


def _metadata_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None,
                     server: KubernetesVersion) -> list[FieldError]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return []
    name = meta.get("name")
    errors = []
    if not name and not meta.get("generateName"):
        errors.append(FieldError("metadata.name", structural.REQUIRED,
                                 "Required value: name or generateName is required"))
    elif isinstance(name, str) and name:
        if len(name) > 253:
            errors.append(FieldError("metadata.name", structural.INVALID,
                                     f'Invalid value: "{name}": must be no more than 253 characters'))
        elif not objectmeta.SUBDOMAIN.search(name):
            errors.append(FieldError("metadata.name", structural.INVALID,
                                     f'Invalid value: "{name}": {objectmeta.SUBDOMAIN_MESSAGE}'))
    if old is None:
        return errors + objectmeta.errors(meta, create=True, server=server)
    # An update checks metadata three times (apiserver's BeforeUpdate): its common fields with
    # the create checks and then the update checks, then the CRD handler's update checks again.
    errors += objectmeta.errors(meta, create=True, server=server)
    if (old.get("metadata") or {}).get("name") != name:
        errors.append(FieldError("metadata.name", structural.INVALID,
                                 f'Invalid value: "{name}": field is immutable'))
    return errors + 2 * objectmeta.errors(meta, create=False, server=server)
