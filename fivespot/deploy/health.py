"""When an applied object is ready for the next wave to rely on it: a pure verdict on the live object.

The rules of Argo CD's built-in health checks and `kubectl wait`: a CRD is ready when the
API server serves it (Established, NamesAccepted), a Deployment when its controller has seen the
latest spec and every replica is updated and available, a Namespace when it is Active; and one of
fivespot's own, a webhook configuration when each webhook has the caBundle the API server verifies
it with. Anything
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


def webhook_configuration(obj: dict[str, Any]) -> Health:
    """Ready when the API server can verify every webhook it calls through a Service: its
    caBundle is there (the webhook injects it, self-managed; cert-manager's CA injector otherwise)."""
    missing = [str(w.get("name")) for w in obj.get("webhooks") or []
               if "service" in (w.get("clientConfig") or {})
               and not (w.get("clientConfig") or {}).get("caBundle")]
    if missing:
        return Health(False, f"no caBundle yet for {', '.join(missing)}")
    return READY


def judge(obj: dict[str, Any]) -> Health:
    """The health of any live object."""
    kind = obj.get("kind")
    if kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        return webhook_configuration(obj)
    if kind == "CustomResourceDefinition":
        return crd(obj)
    if kind == "Deployment":
        return deployment(obj)
    if kind == "Namespace":
        return namespace(obj)
    return READY
