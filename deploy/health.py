"""When an applied object is ready for the next wave to rely on it: a pure verdict on the live object.

The same rules Argo CD's built-in health checks and `kubectl wait` use: a CRD is ready when the
API server serves it (Established, NamesAccepted), a Deployment when its controller has seen the
latest spec and every replica is updated and available, a Namespace when it is Active. Anything
else is ready once it exists: the API server accepted it, and nothing reports more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Health:
    ready: bool
    detail: str
    """What is missing, in words a person can act on (empty when ready)."""


READY = Health(True, "")


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(c.get("type")): c for c in (obj.get("status") or {}).get("conditions") or []}


def crd(obj: dict[str, Any]) -> Health:
    conditions = _conditions(obj)
    for wanted in ("NamesAccepted", "Established"):
        condition = conditions.get(wanted, {})
        if condition.get("status") != "True":
            why = condition.get("message") or "not reported yet"
            return Health(False, f"not {wanted}: {why}")
    return READY


def deployment(obj: dict[str, Any]) -> Health:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    generation = int((obj.get("metadata") or {}).get("generation") or 0)
    if int(status.get("observedGeneration") or 0) < generation:
        return Health(False, "the deployment controller has not seen this spec yet (is "
                             "kube-controller-manager running?)")
    wanted = int(spec.get("replicas", 1))
    counts = {key: int(status.get(key) or 0)
              for key in ("updatedReplicas", "availableReplicas", "readyReplicas", "replicas")}
    progressing = _conditions(obj).get("Progressing", {})
    if progressing.get("reason") == "ProgressDeadlineExceeded":
        return Health(False, f"rollout stuck: {progressing.get('message', '')}")
    if counts["updatedReplicas"] < wanted or counts["availableReplicas"] < wanted or \
            counts["replicas"] > wanted:
        return Health(False, f"{counts['availableReplicas']}/{wanted} replicas available, "
                             f"{counts['updatedReplicas']} updated")
    return READY


def namespace(obj: dict[str, Any]) -> Health:
    phase = (obj.get("status") or {}).get("phase")
    return READY if phase in (None, "Active") else Health(False, f"phase {phase}")


def judge(obj: dict[str, Any]) -> Health:
    """The health of any live object."""
    kind = obj.get("kind")
    if kind == "CustomResourceDefinition":
        return crd(obj)
    if kind == "Deployment":
        return deployment(obj)
    if kind == "Namespace":
        return namespace(obj)
    return READY
