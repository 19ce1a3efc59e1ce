"""The CompositeSchedule reconciler: the provider reconciler plus watches on its children.

It is a built-in provider (`ProviderReconciler` on its own Manager: informer, work queue, one
Lease per partition, status written only when it changed, conditional on the resourceVersion)
that also observes other provider kinds:
- the children's kinds are watched by group + kind in whatever version the API server serves
  (`fivespot.runtime.kindwatches`, the same resolution the capacity controller uses); a kind whose CRD is
  not installed is unresolved (`ProviderCRDNotInstalled`), and installing it later starts its
  informer and re-queues the composites that wait for it; a kind whose CRD is deleted while it
  is watched has its watch dropped and its composites re-queued the same way (unresolved again
  until the CRD is back);
- every child status event re-queues exactly the composites that reference the child, through
  an index on the composites' raw specs (`namespace/group/kind/name`): nothing polls;
- each reference is read per the provider contract through `fivespot.runtime.schedules` (status only),
  and the decision is the pure `composite.evaluate_with`.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from fivespot.api.kinds.scheduled_capacity import api_group
from fivespot.controllers.spotschedules import composite
from fivespot.controllers.spotschedules.controller import ProviderReconciler, ProviderType
from fivespot.controllers.spotschedules.reconcile import Plan, plan
from fivespot.runtime.cache import Obj
from fivespot.runtime.manager import Manager
from fivespot.runtime.schedules import read_next_transition, read_schedule

log = logging.getLogger("fivespot.provider")

BY_CHILD: Final = "by-child"


def child_key(namespace: str, group: str, kind: object, name: object) -> str:
    """How a child reference is indexed: namespace/group/kind/name."""
    return f"{namespace}/{group}/{kind}/{name}"


def _references(node: object) -> Iterator[Mapping[str, Any]]:
    """Every reference-shaped node of a raw spec (which may be invalid)."""
    if not isinstance(node, Mapping):
        return
    if "kind" in node and "name" in node:
        yield node
    for key in ("anyOf", "allOf"):
        children = node.get(key)
        if isinstance(children, list):
            for child in children:
                yield from _references(child)
    yield from _references(node.get("not"))


def child_keys(obj: Obj) -> list[str]:
    """The index keys of one CompositeSchedule: the children its raw spec names."""
    meta = obj.get("metadata")
    namespace = str(meta.get("namespace", "")) if isinstance(meta, Mapping) else ""
    return sorted({child_key(namespace, api_group(str(ref.get("apiVersion", ""))), ref.get("kind"),
                             ref.get("name")) for ref in _references(obj.get("spec"))})


class CompositeReconciler(ProviderReconciler):
    """ProviderReconciler for CompositeSchedule, with its children's kinds watched."""

    def __init__(self, mgr: Manager, provider: ProviderType,
                 child_kinds: Sequence[tuple[str, str]] = ()):
        super().__init__(mgr, provider)
        self.informer.add_index(BY_CHILD, child_keys)
        self.informer.add_handler(self._on_own)
        self.children = mgr.kind_watches(self._on_child, on_change=self._on_kind_changed)
        for group, kind in child_kinds:
            self.children.want(group, kind)

    # --- events ---------------------------------------------------------------------------------

    def _parents(self, obj: Obj) -> list[Obj]:
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        key = child_key(str(meta.get("namespace", "")), api_group(str(obj.get("apiVersion", ""))),
                        obj.get("kind"), meta.get("name"))
        return self.informer.by_index(BY_CHILD, key)

    def _on_child(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        self.mgr.enqueue_objects(self._parents(obj))

    def _on_own(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        # A composite's spec is part of every cycle through it, and a child's, too: parents
        # re-check when it changes (its status reaches them through `_on_child`).
        self.mgr.enqueue_objects(self._parents(obj))

    def _on_kind_changed(self, group_kind: tuple[str, str]) -> None:
        group, kind = group_kind
        self.mgr.enqueue_objects(o for o in self.informer.list()
                                 if any(f"/{group}/{kind}/" in k for k in child_keys(o)))

    # --- the decision ---------------------------------------------------------------------------

    def plan(self, obj: Obj, now: dt.datetime) -> Plan:
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        children = composite.Children(
            name=name,
            lookup=lambda ref: read_schedule(self.children, namespace, ref.group, ref.kind,
                                             ref.name, reference=ref.field),
            upcoming=lambda ref: read_next_transition(self.children, namespace, ref.group,
                                                      ref.kind, ref.name),
            graph=functools.partial(self._expression, namespace),
        )
        return plan(obj, functools.partial(composite.evaluate_with, children), now)

    def _expression(self, namespace: str, name: str) -> composite.Expr | None:
        other = self.informer.get(namespace, name)
        if other is None:
            return None
        parsed = composite.parse_spec(other.get("spec") if isinstance(other.get("spec"), Mapping) else None)
        return parsed if not isinstance(parsed, Exception) else None
