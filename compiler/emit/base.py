"""What every emitter shares: the Artifact type, the layer folders, and common labels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

# Layer folders, in the order the cluster must receive them (Argo CD waves, Flux dependsOn).
CRDS: Final = "crds"
RBAC: Final = "rbac"
ADMISSION: Final = "admission"
WORKLOADS: Final = "workloads"
SCHEDULES: Final = "schedules"
"""Schedule objects in tenant namespaces (compiled exchange calendars): last, so a tenant
namespace that does not exist yet fails this layer alone."""
MONITORING: Final = "monitoring"
"""ServiceMonitors and the PrometheusRule (Platform.spec.monitoring): after everything else, as
they only observe it, and so a cluster without the Prometheus Operator fails this layer alone."""
LAYERS: Final = (CRDS, RBAC, ADMISSION, WORKLOADS, SCHEDULES, MONITORING)
SYNC_WAVES: Final = {CRDS: "0", RBAC: "1", ADMISSION: "2", WORKLOADS: "3", SCHEDULES: "4",
                     MONITORING: "5"}

PART_OF: Final = "fivespot"
MANAGED_BY: Final = "fivespot-compiler"


@dataclass(frozen=True)
class Artifact:
    """One Kubernetes object destined for `path` (relative to OUT_DIR) in `layer`."""

    layer: str
    path: str
    obj: dict[str, Any]

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
