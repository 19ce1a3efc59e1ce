"""What every emitter shares: the Artifact type, the layer folders, and common labels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

# Layer folders, in the order the cluster must receive them (Argo CD waves, Flux dependsOn).
CRDS: Final = "crds"
RBAC: Final = "rbac"
ADMISSION: Final = "admission"
WORKLOADS: Final = "workloads"
WEBHOOK_CONFIG: Final = "webhook"
"""The ValidatingWebhookConfiguration alone, once the webhook Deployment is healthy: a webhook
configuration (failurePolicy Fail) that arrives before its server refuses every write it guards."""
SCHEDULES: Final = "schedules"
"""Schedule objects in tenant namespaces (compiled exchange calendars): after the workloads and the
webhook (the providers that publish their status run by then), so a tenant
namespace that does not exist yet fails this layer alone."""
MONITORING: Final = "monitoring"
"""ServiceMonitors and the PrometheusRule (Platform.spec.monitoring): after everything else, as
they only observe it, and so a cluster without the Prometheus Operator fails this layer alone."""
LAYERS: Final = (CRDS, RBAC, ADMISSION, WORKLOADS, WEBHOOK_CONFIG, SCHEDULES, MONITORING)
SYNC_WAVES: Final = {layer: str(wave) for wave, layer in enumerate(LAYERS)}
"""A layer's Argo CD sync wave is its place in LAYERS: the one machine-readable order, written on
every object (`argocd.argoproj.io/sync-wave`) and followed by the Flux dependsOn chain."""

PART_OF: Final = "fivespot"
MANAGED_BY: Final = "fivespot-compiler"


@dataclass(frozen=True)
class Artifact:
    """One Kubernetes object destined for `path` (relative to OUT_DIR) in `layer`."""

    layer: str
    path: str
    obj: dict[str, Any]
    comment: str = ""
    """Lines written as a YAML comment above the object: how to apply a file that is not synced
    like the rest (argocd-cm's health keys)."""
    unpruned: bool = False
    """A GitOps engine leaves it in the cluster when it leaves the output (Argo CD `Prune=false`,
    Flux `prune: disabled`; still deleted with the Application): what objects stored under an
    older output still need (`gitops.decorate`)."""

    def header(self) -> str:
        return "".join(f"# {line}".rstrip() + "\n" for line in self.comment.splitlines())

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])


def labels(component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": component,
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }


def metadata(name: str, component: str, namespace: str | None = None,
             annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = labels(component)
    if annotations:
        meta["annotations"] = dict(sorted(annotations.items()))
    return meta
