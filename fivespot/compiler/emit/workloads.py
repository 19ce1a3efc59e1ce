"""Hardened workloads: per component a ServiceAccount, a Deployment, a PodDisruptionBudget and a
metrics Service; plus the ServiceAccount each custom provider's own Deployment runs as.

Why each piece of the pod is the way it is:
- One image, one binary per component (`fivespot controller capacity`, `fivespot provider
  <name>`, `fivespot webhook serve`), each with its own ServiceAccount: the separation of
  identities (docs/design/decisions/0001-one-identity-per-component.md) is only real if the
  processes are separate too.
- Restricted Pod Security in full (the install namespace enforces it): non-root with a numeric
  UID/GID (65532, so the kubelet can verify non-root without reading the image), read-only root
  filesystem with an in-memory `emptyDir` for `/tmp`, no privilege escalation, every capability
  dropped, seccomp RuntimeDefault. Service links are off: nothing reads them.
- The bundle ConfigMap is mounted read-only at `/etc/fivespot`; its sha256 is a pod-template
  annotation, so a new bundle rolls the pods instead of waiting for a kubelet resync that a
  process holding the file open would not notice.
- `POD_NAME`/`POD_NAMESPACE` from the downward API are the lease holder identity (and the
  namespace the leases and the webhook Secret live in).
- Controllers: liveness `/healthz`, readiness `/readyz` on 8080, the port that also serves
  `/metrics`. The webhook's probes go to its serving port 8443 over HTTPS instead: the probe then
  takes the very path the API server takes (TLS listener, loaded certificate, request workers),
  so a pod whose certificate is missing or whose workers are wedged leaves the Service rather
  than timing out admission requests; its metrics stay on 8080.
- Replicas from the Platform, spread across nodes (`ScheduleAnyway`, so a one-node cluster
  still schedules), rolling updates that never drop below the desired count, and a PDB with
  `maxUnavailable: 1` so a node drain can always make progress without taking every replica.
- The webhook's pod sleeps `PRE_STOP_SLEEP_S` in a preStop hook (the kubelet's own sleep
  action, GA in 1.34, the oldest supported version) before it gets SIGTERM: a pod being deleted
  leaves the endpoints the API server calls only after the endpoint controller has seen the
  deletion, and until then the API server may still send it a request, or reuse a kept-alive
  connection the server is about to close (an `EOF` the API server does not retry: a refused
  write in the middle of a rollout).
- In cert-manager mode the webhook mounts the `fivespot-webhook-tls` Secret and is told where
  (`--cert-dir`); in self-managed mode it keeps that Secret itself through the API.
- With `webhook.clientAuthentication` the webhook mounts the client CA (the ConfigMap's or
  Secret's key, as `ca.crt`) and is told it and the allowed names (`--client-ca-path`,
  `--client-subject-names`); `webhook.minTLSVersion` 1.2 adds `--min-tls-version 1.2`.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any, Final

from fivespot.api.identities import (
    BUNDLE_CONFIGMAP,
    BUNDLE_MOUNT,
    METRICS_PORT,
    WEBHOOK_PORT,
    WEBHOOK_TLS_SECRET,
)
from fivespot.compiler.emit.base import WORKLOADS, Artifact, labels, metadata
from fivespot.compiler.emit.bundle import bundle_json
from fivespot.compiler.emit.components import Component, components, custom_identities
from fivespot.compiler.repo import Repo
from fivespot.compiler.spec import CertificateMode, WebhookClientAuthentication

USER_ID: Final = 65532
BUNDLE_CHECKSUM_ANNOTATION: Final = "5spot.finos.org/bundle-sha256"
TLS_MOUNT: Final = "/var/run/fivespot/tls"
CLIENT_CA_MOUNT: Final = "/var/run/fivespot/client-ca"
CLIENT_CA_FILE: Final = "ca.crt"
DEFAULT_MIN_TLS_VERSION: Final = "1.3"
METRICS_PORT_NAME: Final = "metrics"
WEBHOOK_PORT_NAME: Final = "https"

CONTROLLER_RESOURCES: Final = {
    "requests": {"cpu": "50m", "memory": "128Mi"},
    "limits": {"cpu": "500m", "memory": "512Mi"},
}
WEBHOOK_RESOURCES: Final = {
    "requests": {"cpu": "200m", "memory": "256Mi"},
    "limits": {"cpu": "1", "memory": "512Mi"},
}


def selector(component: str) -> dict[str, str]:
    """The labels a component's pods carry and its Deployment, PDB and Services select on."""
    return {k: v for k, v in labels(component).items() if k != "app.kubernetes.io/managed-by"}


def cert_manager(repo: Repo) -> bool:
    return repo.platform.spec.webhook.certificate.mode is CertificateMode.CERT_MANAGER


# --- the container -------------------------------------------------------------------------------


def container_security_context() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "runAsGroup": USER_ID,
        "runAsNonRoot": True,
        "runAsUser": USER_ID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def pod_security_context() -> dict[str, Any]:
    return {
        "fsGroup": USER_ID,
        "runAsGroup": USER_ID,
        "runAsNonRoot": True,
        "runAsUser": USER_ID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _probe(path: str, port: int, scheme: str, period: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": port, "scheme": scheme},
        "periodSeconds": period, "timeoutSeconds": 2, "failureThreshold": failures,
    }


def probes(component: Component) -> dict[str, Any]:
    port, scheme = ((WEBHOOK_PORT, "HTTPS") if component.serves_admission
                    else (METRICS_PORT, "HTTP"))
    return {
        "livenessProbe": {**_probe("/healthz", port, scheme, 10, 3), "initialDelaySeconds": 5},
        "readinessProbe": _probe("/readyz", port, scheme, 5, 2),
    }


def ports(component: Component) -> list[dict[str, Any]]:
    found = [{"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT, "protocol": "TCP"}]
    if component.serves_admission:
        found.insert(0, {"name": WEBHOOK_PORT_NAME, "containerPort": WEBHOOK_PORT, "protocol": "TCP"})
    return found


def _mounts_tls(repo: Repo, component: Component) -> bool:
    return component.serves_admission and cert_manager(repo)


def _client_authentication(repo: Repo, component: Component) -> WebhookClientAuthentication | None:
    return repo.platform.spec.webhook.client_authentication if component.serves_admission else None


def args(repo: Repo, component: Component) -> list[str]:
    found = list(component.args)
    if _mounts_tls(repo, component):
        found += ["--cert-dir", TLS_MOUNT]
    if not component.serves_admission:
        return found
    settings = repo.platform.spec.webhook
    if settings.min_tls_version != DEFAULT_MIN_TLS_VERSION:
        found += ["--min-tls-version", settings.min_tls_version]
    if (clients := _client_authentication(repo, component)) is not None:
        found += ["--client-ca-path", f"{CLIENT_CA_MOUNT}/{CLIENT_CA_FILE}",
                  "--client-subject-names", ",".join(clients.allowed_names)]
    return found


def volume_mounts(repo: Repo, component: Component) -> list[dict[str, Any]]:
    mounts: list[dict[str, Any]] = [{"name": "bundle", "mountPath": BUNDLE_MOUNT, "readOnly": True},
              {"name": "tmp", "mountPath": "/tmp"}]
    if _mounts_tls(repo, component):
        mounts.append({"name": "tls", "mountPath": TLS_MOUNT, "readOnly": True})
    if _client_authentication(repo, component) is not None:
        mounts.append({"name": "client-ca", "mountPath": CLIENT_CA_MOUNT, "readOnly": True})
    return mounts


def _client_ca_volume(clients: WebhookClientAuthentication) -> dict[str, Any]:
    """The CA's key as `ca.crt`, whichever object holds it."""
    if clients.ca_config_map is not None:
        ref = clients.ca_config_map
        return {"name": "client-ca", "configMap": {
            "name": ref.name, "items": [{"key": ref.key, "path": CLIENT_CA_FILE}],
            "defaultMode": 0o444}}
    assert clients.ca_secret is not None  # the model requires one of the two
    ref = clients.ca_secret
    return {"name": "client-ca", "secret": {
        "secretName": ref.name, "items": [{"key": ref.key, "path": CLIENT_CA_FILE}],
        "defaultMode": 0o440}}


def volumes(repo: Repo, component: Component) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = [
        {"name": "bundle", "configMap": {"name": BUNDLE_CONFIGMAP, "defaultMode": 0o444}},
        {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
    ]
    if _mounts_tls(repo, component):
        found.append({"name": "tls", "secret": {"secretName": WEBHOOK_TLS_SECRET, "defaultMode": 0o440}})
    if (clients := _client_authentication(repo, component)) is not None:
        found.append(_client_ca_volume(clients))
    return found


PRE_STOP_SLEEP_S: Final = 5
"""How long a webhook pod keeps serving after its deletion, while it leaves the endpoints (see the
module docstring); well inside the default 30 s grace period, with gunicorn's 10 s to finish."""


def lifecycle(component: Component) -> dict[str, Any]:
    if not component.serves_admission:
        return {}
    return {"lifecycle": {"preStop": {"sleep": {"seconds": PRE_STOP_SLEEP_S}}}}


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}


def container(repo: Repo, component: Component) -> dict[str, Any]:
    return {
        "name": component.name.removeprefix("fivespot-"),
        "image": repo.platform.spec.image,
        "imagePullPolicy": repo.platform.spec.image_pull_policy,
        "args": args(repo, component),
        "env": [_field_env("POD_NAME", "metadata.name"),
                _field_env("POD_NAMESPACE", "metadata.namespace")],
        "ports": ports(component),
        **probes(component),
        **lifecycle(component),
        "resources": copy.deepcopy(WEBHOOK_RESOURCES if component.serves_admission
                                   else CONTROLLER_RESOURCES),
        "securityContext": container_security_context(),
        "volumeMounts": volume_mounts(repo, component),
    }


# --- the objects ---------------------------------------------------------------------------------


def bundle_checksum(repo: Repo) -> str:
    return hashlib.sha256(bundle_json(repo).encode()).hexdigest()


def pod_template(repo: Repo, component: Component, checksum: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": labels(component.name),
                     "annotations": {BUNDLE_CHECKSUM_ANNOTATION: checksum}},
        "spec": {
            "serviceAccountName": component.name,
            "automountServiceAccountToken": True,
            "enableServiceLinks": False,
            "securityContext": pod_security_context(),
            "containers": [container(repo, component)],
            "volumes": volumes(repo, component),
            "topologySpreadConstraints": [{
                "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": selector(component.name)},
            }],
        },
    }


def deployment(repo: Repo, component: Component, checksum: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": metadata(component.name, component.name, repo.namespace),
        "spec": {
            "replicas": component.replicas,
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": selector(component.name)},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": pod_template(repo, component, checksum),
        },
    }


def service_account(name: str, namespace: str) -> dict[str, Any]:
    """Every identity here talks to the API server, so its token is mounted."""
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": metadata(name, name, namespace), "automountServiceAccountToken": True}


def disruption_budget(component: Component, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": metadata(component.name, component.name, namespace),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector(component.name)}},
    }


def metrics_service(component: Component, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": metadata(f"{component.name}-metrics", component.name, namespace),
        "spec": {
            "type": "ClusterIP",
            "selector": selector(component.name),
            "ports": [{"name": METRICS_PORT_NAME, "port": METRICS_PORT,
                       "targetPort": METRICS_PORT_NAME, "protocol": "TCP"}],
        },
    }


def _artifact(obj: dict[str, Any]) -> Artifact:
    return Artifact(WORKLOADS, f"{WORKLOADS}/{obj['metadata']['name']}.{obj['kind'].lower()}.yaml", obj)


def emit(repo: Repo) -> list[Artifact]:
    checksum = bundle_checksum(repo)
    artifacts = []
    for component in components(repo):
        artifacts += [_artifact(service_account(component.name, repo.namespace)),
                      _artifact(deployment(repo, component, checksum)),
                      _artifact(disruption_budget(component, repo.namespace)),
                      _artifact(metrics_service(component, repo.namespace))]
    for identity, _ in custom_identities(repo):
        artifacts.append(_artifact(service_account(identity, repo.namespace)))
    return artifacts
