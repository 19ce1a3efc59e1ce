"""The compiled policy bundle (`fivespot.api.bundle.Bundle`): the one document the webhook and the
controllers load.

Built here from the repo, written as `bundle.json` at the top of OUT_DIR (for local processes and
`fivespot check`) and as the `fivespot-bundle` ConfigMap mounted into every pod.
"""

from __future__ import annotations

import functools
from typing import Any

from fivespot.api.bundle import (
    Admission,
    Bundle,
    Cluster,
    Consumer,
    EmbeddableKind,
    Machines,
    Partition,
    Provider,
    WebhookSettings,
)
from fivespot.api.identities import (
    BUNDLE_CONFIGMAP,
    BUNDLE_KEY,
    CAPACITY_CONTROLLER,
    WEBHOOK,
    service_account_user,
)
from fivespot.compiler.emit import admission
from fivespot.compiler.emit.base import WORKLOADS, Artifact, metadata
from fivespot.compiler.emit.crds import provider_infos
from fivespot.compiler.repo import Repo


def bundle(repo: Repo) -> Bundle:
    spec = repo.platform.spec
    return Bundle(
        namespace=repo.namespace,
        partitions=tuple(Partition(name=p.name, namespaces=tuple(sorted(p.namespaces)))
                         for p in sorted(spec.partitions, key=lambda p: p.name)),
        consumers=tuple(Consumer(
            name=c.metadata.name, group=c.spec.group, version=c.spec.version,
            kind=c.spec.kind, resource=c.spec.resource,
            capacity_paths=tuple(c.spec.capacity_paths), drained_path=c.spec.drained_path,
            max_active_value=c.spec.max_active_value,
        ) for c in repo.consumers),
        providers=tuple(Provider(group=p.group, kind=p.kind, plural=p.plural, version=p.version)
                        for p in provider_infos(repo)),
        webhook=WebhookSettings(
            host_governance=spec.webhook.host_governance.value,
            polyfill=repo.polyfill,
            capacity_identity=service_account_user(repo.namespace, CAPACITY_CONTROLLER),
            webhook_identity=service_account_user(repo.namespace, WEBHOOK),
            excluded_namespaces=tuple(sorted({repo.namespace, "kube-system"})),
            timeout_seconds=spec.webhook.timeout_seconds,
        ),
        admission=Admission(
            policies=tuple(admission.policies(repo)) if repo.has_capacity else (),
            params=tuple(admission.params(repo)) if repo.has_capacity else (),
            vaps=repo.emits_vaps,
        ),
        machines=machines(repo),
    )


def machines(repo: Repo) -> Machines | None:
    if repo.machines is None:
        return None
    spec = repo.machines.spec

    def kinds(declared: list[Any]) -> tuple[EmbeddableKind, ...]:
        return tuple(sorted((EmbeddableKind(group=k.group, version=k.version, kind=k.kind,
                                            resource=k.resource) for k in declared),
                            key=lambda k: (k.group, k.kind)))

    return Machines(
        clusters=tuple(sorted((Cluster(namespace=c.namespace, name=c.name) for c in spec.clusters),
                              key=lambda c: (c.namespace, c.name))),
        bootstrap=kinds(spec.bootstrap), infrastructure=kinds(spec.infrastructure),
        machine_version=spec.machine_version,
    )


@functools.lru_cache(maxsize=4)
def bundle_json(repo: Repo) -> str:
    """The bundle as written; computed once per repo (the workloads checksum it too)."""
    return bundle(repo).to_json()


def emit(repo: Repo) -> list[Artifact]:
    config_map = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": metadata(BUNDLE_CONFIGMAP, "fivespot-bundle", repo.namespace),
        "data": {BUNDLE_KEY: bundle_json(repo)},
    }
    return [Artifact(WORKLOADS, f"{WORKLOADS}/{BUNDLE_CONFIGMAP}.configmap.yaml", config_map)]
