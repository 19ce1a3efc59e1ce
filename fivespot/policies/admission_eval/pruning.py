"""Pruning and defaulting: a custom resource as the API server stores it, before validation.

apiextensions-apiserver's `schema/pruning` and `schema/defaulting`, done in one pass: fields the
schema does not declare are pruned (each warned about, `unknown field "spec.foo"`), non-nullable
nulls are dropped, defaults are filled in, and `metadata` keeps only ObjectMeta's fields. Each
node's pass is a closure built once (`build_normaliser`, attached by `crd.compile_schema`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Final

from fivespot.policies.admission_eval.structural import Node, Normaliser, join_path

OBJECT_META_FIELDS: Final = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "ownerReferences", "finalizers", "managedFields",
})


def prune_and_default(value: Any, node: Node, warnings: list[str]) -> Any:
    """A new value: unknown fields pruned (each warned about), nulls dropped, defaults applied.

    `value` is the whole object; its `metadata` keeps only ObjectMeta's fields. Every object the
    schema describes is a new dict; values it leaves as they are (scalars, embedded resources,
    preserved unknown fields) are shared with `value`, not copied: nothing mutates them.
    """
    if not isinstance(value, dict) or node.normalise is None:
        return copy.deepcopy(value)
    return node.normalise(value, "", warnings, True)


def build_normaliser(node: Node) -> Normaliser | None:
    """None when the node hands every value back unchanged (scalars, embedded resources, lists of
    such), so that its parent stores the value without a call."""
    objects = node.type in (None, "object") and not node.embedded
    items = node.items.normalise if node.items is not None else None
    lists = node.type in (None, "array") and items is not None
    if not objects and not lists:
        return None
    object_part = _object_normaliser(node) if objects else None

    def normalise(value: Any, path: str, warnings: list[str], root: bool) -> Any:
        if isinstance(value, dict):
            return object_part(value, path, warnings, root) if object_part is not None else \
                stray(value, node, path, warnings)
        if isinstance(value, list):
            if lists:
                assert items is not None
                return [items(item, f"{path}[{index}]", warnings, False)
                        for index, item in enumerate(value)]
            return stray(value, node, path, warnings)
        return value

    return normalise


def _object_normaliser(node: Node) -> Callable[[dict[str, Any], str, list[str], bool], dict[str, Any]]:
    declared = {key: (child, child.normalise) for key, child in (node.properties or {}).items()}
    additional = node.additional
    additional_normalise = additional.normalise if additional is not None else None
    preserve_unknown = node.preserve_unknown
    defaults = tuple((key, _normalised_default(child)) for key, child in (node.properties or {}).items()
                     if child.has_default)

    def normalise_object(value: dict[str, Any], path: str, warnings: list[str],
                         root: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if root and key == "metadata" and isinstance(item, dict):
                out[key] = _metadata(item, warnings)
                continue
            entry = declared.get(key)
            if entry is not None:
                child, child_normalise = entry
                if item is None and not child.nullable:
                    continue  # dropped (and replaced by its default below, if it has one)
                if child_normalise is not None:
                    out[key] = child_normalise(item, join_path(path, key), warnings, False)
                else:
                    out[key] = stray(item, child, join_path(path, key), warnings)
            elif additional is not None:
                if item is None and not additional.nullable and additional.has_default:
                    continue
                if additional_normalise is not None:
                    out[key] = additional_normalise(item, f"{path}[{key}]", warnings, False)
                else:
                    out[key] = stray(item, additional, f"{path}[{key}]", warnings)
            elif preserve_unknown:
                out[key] = item
            else:
                warnings.append(f'unknown field "{join_path(path, key)}"')
        for key, default in defaults:
            if key not in out:
                out[key] = copy.deepcopy(default) if isinstance(default, (dict, list)) else default
        return out

    return normalise_object


def stray(value: Any, node: Node | None, path: str, warnings: list[str]) -> Any:
    """`value` pruned where its shape is not the node's (an object or a list at a scalar, a list
    at an object, an object at a list), as the API server's pruning walks it whatever the schema's
    type: an object's keys the node does not declare are unknown (the API server then refuses the
    object as `unknown field "spec.x.y"` under strict field validation, before any type check),
    and a list's items go to the node's `items`, which a node of another type has not, so every
    key of an object in it is unknown. Scalars, embedded resources and preserved fields are kept."""
    if node is not None and (node.preserve_unknown or node.embedded):
        return value
    if isinstance(value, dict):
        if node is not None and node.normalise is not None and node.type in (None, "object"):
            return node.normalise(value, path, warnings, False)
        declared = (node.properties or {}) if node is not None else {}
        additional = node.additional if node is not None else None
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in declared:
                out[key] = stray(item, declared[key], join_path(path, key), warnings)
            elif additional is not None:
                out[key] = stray(item, additional, f"{path}[{key}]", warnings)
            else:
                warnings.append(f'unknown field "{join_path(path, key)}"')
        return out
    if isinstance(value, list):
        items = node.items if node is not None else None
        return [stray(item, items, f"{path}[{index}]", warnings) for index, item in enumerate(value)]
    return value


def _normalised_default(node: Node) -> Any:
    """A property's default as it is applied: itself pruned and defaulted (computed once)."""
    default = copy.deepcopy(node.default)
    return node.normalise(default, "", [], False) if node.normalise is not None else default


def _metadata(meta: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """ObjectMeta's own fields only; `meta` itself when it has no others."""
    unknown = [key for key in meta if key not in OBJECT_META_FIELDS]
    if not unknown:
        return meta
    warnings.extend(f'unknown field "metadata.{key}"' for key in unknown)
    return {key: item for key, item in meta.items() if key in OBJECT_META_FIELDS}
