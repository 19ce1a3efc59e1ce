"""The compiled policy bundle: the one document the webhook and the controllers load.

It carries the allowlists (consumers: group, kind, resource, paths, drain counter, ceiling), the
partitions, the provider kinds, the webhook settings, and the admission objects the webhook's
polyfill evaluates. Written as `bundle.json` at the top of OUT_DIR (for local processes and
`fivespot check`) and as the `fivespot-bundle` ConfigMap mounted into every pod.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Final

from compiler.emit import admission
from compiler.emit.base import WORKLOADS, Artifact, metadata
from compiler.emit.crds import provider_infos
from compiler.emit.identities import (
    BUNDLE_CONFIGMAP,
    BUNDLE_KEY,
    CAPACITY_CONTROLLER,
    WEBHOOK,
    service_account_user,
)
from compiler.repo import Repo

BUNDLE_VERSION: Final = 1


def bundle(repo: Repo) -> dict[str, Any]:
    spec = repo.platform.spec
    return {
        "bundleVersion": BUNDLE_VERSION,
        "namespace": repo.namespace,
        "partitions": [{"name": p.name, "namespaces": sorted(p.namespaces)}
                       for p in sorted(spec.partitions, key=lambda p: p.name)],
        "consumers": [{
            "name": c.metadata.name, "group": c.spec.group, "version": c.spec.version,
            "kind": c.spec.kind, "resource": c.spec.resource,
            "capacityPaths": list(c.spec.capacity_paths), "drainedPath": c.spec.drained_path,
            "maxActiveValue": c.spec.max_active_value,
        } for c in repo.consumers],
        "providers": [{"group": p.group, "kind": p.kind, "plural": p.plural, "version": p.version}
                      for p in provider_infos(repo)],
        "webhook": {
            "hostGovernance": spec.webhook.host_governance.value,
            "polyfill": repo.polyfill,
            "capacityIdentity": service_account_user(repo.namespace, CAPACITY_CONTROLLER),
            "webhookIdentity": service_account_user(repo.namespace, WEBHOOK),
            "excludedNamespaces": sorted({repo.namespace, "kube-system"}),
            "timeoutSeconds": spec.webhook.timeout_seconds,
        },
        "admission": {
            "policies": admission.policies(repo) if repo.has_capacity else [],
            "params": admission.params(repo) if repo.has_capacity else [],
        },
    }


@functools.lru_cache(maxsize=4)
def bundle_json(repo: Repo) -> str:
    """The bundle as written; computed once per repo (the workloads checksum it too)."""
    return json.dumps(bundle(repo), indent=2, sort_keys=True) + "\n"


def emit(repo: Repo) -> list[Artifact]:
    config_map = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": metadata(BUNDLE_CONFIGMAP, "fivespot-bundle", repo.namespace),
        "data": {BUNDLE_KEY: bundle_json(repo)},
    }
    return [Artifact(WORKLOADS, f"{WORKLOADS}/{BUNDLE_CONFIGMAP}.configmap.yaml", config_map)]
