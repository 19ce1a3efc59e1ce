"""The admission webhook's configuration: its Service, the ValidatingWebhookConfiguration, and
(cert-manager mode) its Certificate. Only when the repo has a consumer: otherwise there is
nothing to guard.

Four webhooks, each for what CEL cannot do (Kubernetes' webhook good practices throughout:
AdmissionReview v1, `sideEffects: None`, a small timeout, `matchPolicy: Equivalent` so a request
through any served version is still seen, and nothing that could block the cluster's own
recovery):
- host-governance: ScheduledCapacity CREATE/UPDATE, a cross-object check against the
  ScheduledMachines' nodes. The install namespace and kube-system are excluded.
- field-governance: ScheduledCapacity CREATE/UPDATE, a cross-object check against the other
  ScheduledCapacities naming the same target object (one field, one governor:
  `fivespot.api.fieldgovernance`). The install namespace and kube-system are excluded.
- target-guard: every operation on every consumer resource and every subresource of it
  (`/status`, `/scale`, `/*`), narrowed by a match condition to the capacity controller's own
  identity. Its failurePolicy is always `Fail`, whatever the Platform says for the others: only
  that identity's writes are sent to it, so failing closed can block nobody else (and on
  clusters too old for match conditions `target_guard_namespaces` keeps the install namespace
  and kube-system out), while failing open would leave those writes with RBAC alone. It is the diff guard on governed objects (that identity may change only an
  allowlisted field), so nobody else's traffic should ever pay its latency or depend on its
  availability. It is the second lock behind RBAC, so it covers what RBAC forbids too (create,
  delete, subresources): it still holds if someone widens the ClusterRole by hand. It has no
  namespace exclusion (on clusters that honour match conditions: `target_guard_namespaces`): the
  match condition is what keeps it out of everyone else's way, recovery in the install namespace
  included, and the capacity identity's ClusterRole reaches every namespace, so its second lock
  does too.
- vap-polyfill (enforcement `webhook` or `both`): ScheduledCapacity CREATE/UPDATE, the same
  policies as the ValidatingAdmissionPolicies, for clusters without them.

Who may connect: a NetworkPolicy on the webhook's pods admits the serving port only from
`webhook.networkPolicy.allowedSources` (the API server's addresses, which only the platform team
knows: docs/explanation/webhook.md, per platform), and the metrics port from `metricsSources`. With no sources named
the serving port admits nobody the CNI governs — the webhook fails closed (failurePolicy) rather
than being reachable from every pod in the cluster, where eight slow connections once sufficed
to stall admission. (Traffic from a pod's own node, the kubelet's probes, is always allowed.)

Certificates: self-managed mode leaves `caBundle` out of the object — the webhook writes it at run
time, and the GitOps layer tells Argo CD to ignore that field — and emits the Secret
`fivespot-webhook-tls` empty (`tls_secret`): the webhook fills it and keeps it, but may not
create Secrets (security review F7), and the GitOps layer makes Argo CD and Flux create it once
and never put its data back. cert-manager mode emits a Certificate for the Service's DNS names
(cert-manager creates and fills that Secret) and lets cert-manager's CA injector fill `caBundle`.
"""

from __future__ import annotations

from typing import Any, Final

from fivespot.api.fieldgovernance import through_scale
from fivespot.api.identities import (
    CAPACITY_CONTROLLER,
    CREATE_ONLY,
    METRICS_PORT,
    WEBHOOK,
    WEBHOOK_CONFIGURATION,
    WEBHOOK_PORT,
    WEBHOOK_TLS_SECRET,
    service_account_user,
)
from fivespot.api.kinds import scheduled_capacity as scap
from fivespot.compiler.emit.base import ADMISSION, WEBHOOK_CONFIG, WORKLOADS, Artifact, metadata
from fivespot.compiler.emit.workloads import WEBHOOK_PORT_NAME, cert_manager, selector
from fivespot.compiler.repo import Repo
from fivespot.compiler.spec import FailurePolicy, NetworkPeer
from fivespot.policies import admission as admission_rules

SERVICE_PORT: Final = 443
HOST_GOVERNANCE: Final = "host-governance.5spot.finos.org"
FIELD_GOVERNANCE: Final = "field-governance.5spot.finos.org"
TARGET_GUARD: Final = "target-guard.5spot.finos.org"
VAP_POLYFILL: Final = "vap-polyfill.5spot.finos.org"
HOST_GOVERNANCE_PATH: Final = "/validate/host-governance"
FIELD_GOVERNANCE_PATH: Final = "/validate/field-governance"
TARGET_GUARD_PATH: Final = "/validate/target-guard"
VAP_POLYFILL_PATH: Final = "/validate/vap-polyfill"
INJECT_CA_ANNOTATION: Final = "cert-manager.io/inject-ca-from"
CERT_MANAGER_API: Final = "cert-manager.io/v1"


def excluded_namespaces(repo: Repo) -> list[str]:
    return sorted({repo.namespace, "kube-system"})


def dns_names(repo: Repo) -> list[str]:
    service = f"{WEBHOOK}.{repo.namespace}.svc"
    return [service, f"{service}.cluster.local"]


def service(repo: Repo) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": metadata(WEBHOOK, WEBHOOK, repo.namespace),
        "spec": {
            "type": "ClusterIP",
            "selector": selector(WEBHOOK),
            "ports": [{"name": WEBHOOK_PORT_NAME, "port": SERVICE_PORT,
                       "targetPort": WEBHOOK_PORT, "protocol": "TCP"}],
        },
    }


def _peers(peers: list[NetworkPeer]) -> list[dict[str, Any]]:
    return [peer.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)
            for peer in peers]


def network_policy(repo: Repo) -> dict[str, Any]:
    """Ingress to the webhook's pods: the serving port from the allowed sources only (no rule at
    all when there are none: a rule without `from` would admit everyone), metrics from theirs."""
    settings = repo.platform.spec.webhook.network_policy
    rules = [{"from": _peers(sources), "ports": [{"port": port, "protocol": "TCP"}]}
             for sources, port in ((settings.allowed_sources, WEBHOOK_PORT),
                                   (settings.metrics_sources, METRICS_PORT)) if sources]
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": metadata(WEBHOOK, WEBHOOK, repo.namespace),
        "spec": {"podSelector": {"matchLabels": selector(WEBHOOK)}, "policyTypes": ["Ingress"],
                 "ingress": rules},
    }


# --- the webhooks --------------------------------------------------------------------------------


def _rule(group: str, resources: list[str], operations: list[str],
          scope: str | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"apiGroups": [group], "apiVersions": ["*"],
                            "operations": operations, "resources": resources}
    if scope:
        rule["scope"] = scope
    return rule


def _scap_rules() -> list[dict[str, Any]]:
    return [_rule(scap.GROUP, [scap.PLURAL], ["CREATE", "UPDATE"], "Namespaced")]


def consumer_rules(repo: Repo) -> list[dict[str, Any]]:
    """One rule per consumer API group: every operation on its resources and all their
    subresources (`resource/*`), sorted. A consumer written through `/scale` on a cluster that
    serves ValidatingAdmissionPolicies has its scale writes judged by the API server instead
    (`fivespot.compiler.emit.admission.scale_guard_policies`, decision 0050): its rule names the
    resource and its one other subresource, `/status`."""
    by_group: dict[str, set[str]] = {}
    for consumer in repo.consumers:
        spec = consumer.spec
        in_api_server = repo.platform.spec.serves_vaps and \
            through_scale(spec.group, spec.kind, spec.capacity_paths)
        by_group.setdefault(spec.group, set()).update(
            {spec.resource, f"{spec.resource}/status" if in_api_server else f"{spec.resource}/*"})
    return [_rule(group, sorted(resources), ["*"]) for group, resources in sorted(by_group.items())]


MATCH_CONDITIONS: Final = (1, 28)
"""matchConditions are on by default from Kubernetes 1.28 (beta; GA in 1.30). Older API servers
drop them, and then every identity's writes would reach the target guard."""


def target_guard_namespaces(repo: Repo) -> dict[str, Any]:
    """Every namespace where the match condition narrows the guard to the capacity identity; on
    clusters too old to honour it, the install namespace and kube-system stay out, so nobody's
    recovery there waits on the webhook (that identity is then unguarded there: docs/explanation/webhook.md)."""
    matched = repo.platform.spec.min_minor >= MATCH_CONDITIONS
    return {} if matched else excluding_own_namespaces(repo)


def capacity_identity_condition(repo: Repo) -> dict[str, str]:
    return admission_rules.capacity_identity_condition(
        service_account_user(repo.namespace, CAPACITY_CONTROLLER))


def excluding_own_namespaces(repo: Repo) -> dict[str, Any]:
    return {"matchExpressions": [{
        "key": "kubernetes.io/metadata.name", "operator": "NotIn",
        "values": excluded_namespaces(repo),
    }]}


def _webhook(repo: Repo, name: str, path: str, rules: list[dict[str, Any]],
             conditions: list[dict[str, str]] | None = None,
             namespaces: dict[str, Any] | None = None,
             failure_policy: FailurePolicy | None = None) -> dict[str, Any]:
    settings = repo.platform.spec.webhook
    hook: dict[str, Any] = {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"namespace": repo.namespace, "name": WEBHOOK,
                                     "path": path, "port": SERVICE_PORT}},
        "failurePolicy": (failure_policy or settings.failure_policy).value,
        **({"matchConditions": conditions} if conditions else {}),
        "matchPolicy": "Equivalent",
        "namespaceSelector": namespaces if namespaces is not None else excluding_own_namespaces(repo),
        "rules": rules,
        "sideEffects": "None",
        "timeoutSeconds": settings.timeout_seconds,
    }
    return hook


def emergency_stop_condition() -> dict[str, str]:
    """ScheduledCapacity updates that only stop the object skip the webhook (`fivespot.policies.admission`
    EMERGENCY_STOP): the kill switch and `enabled: false` work while the webhook is down."""
    return {"name": admission_rules.EMERGENCY_STOP_CONDITION,
            "expression": admission_rules.EMERGENCY_STOP}


def webhooks(repo: Repo) -> list[dict[str, Any]]:
    stop = [emergency_stop_condition()]
    found = [
        _webhook(repo, HOST_GOVERNANCE, HOST_GOVERNANCE_PATH, _scap_rules(), stop),
        _webhook(repo, FIELD_GOVERNANCE, FIELD_GOVERNANCE_PATH, _scap_rules(), stop),
        _webhook(repo, TARGET_GUARD, TARGET_GUARD_PATH, consumer_rules(repo),
                 [capacity_identity_condition(repo)], namespaces=target_guard_namespaces(repo),
                 failure_policy=FailurePolicy.FAIL),
    ]
    if repo.polyfill:
        found.append(_webhook(repo, VAP_POLYFILL, VAP_POLYFILL_PATH, _scap_rules(), stop))
    return found


# --- certificates --------------------------------------------------------------------------------


def configuration(repo: Repo) -> dict[str, Any]:
    annotations = ({INJECT_CA_ANNOTATION: f"{repo.namespace}/{WEBHOOK}"}
                   if cert_manager(repo) else None)
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": metadata(WEBHOOK_CONFIGURATION, WEBHOOK, annotations=annotations),
        "webhooks": webhooks(repo),
    }


def certificate(repo: Repo) -> dict[str, Any]:
    issuer = repo.platform.spec.webhook.certificate.issuer_ref
    if issuer is None:  # the Platform model requires it in cert-manager mode
        raise AssertionError("cert-manager mode without issuerRef")
    return {
        "apiVersion": CERT_MANAGER_API, "kind": "Certificate",
        "metadata": metadata(WEBHOOK, WEBHOOK, repo.namespace),
        "spec": {
            "secretName": WEBHOOK_TLS_SECRET,
            "dnsNames": dns_names(repo),
            "issuerRef": {"group": "cert-manager.io", "kind": issuer.kind, "name": issuer.name},
            "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
            "usages": ["server auth", "digital signature"],
        },
    }


def tls_secret(repo: Repo) -> dict[str, Any]:
    """The self-managed certificates' Secret, empty: a `kubernetes.io/tls` Secret must have its
    two keys, and the webhook fills them (and the CA's) with an update."""
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": metadata(WEBHOOK_TLS_SECRET, WEBHOOK, repo.namespace,
                                 annotations=dict([CREATE_ONLY])),
            "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}}


def emit(repo: Repo) -> list[Artifact]:
    if not repo.has_webhook:
        return []
    artifacts = [
        Artifact(WEBHOOK_CONFIG, f"{WEBHOOK_CONFIG}/{WEBHOOK_CONFIGURATION}"
                 ".validatingwebhookconfiguration.yaml", configuration(repo)),
        Artifact(WORKLOADS, f"{WORKLOADS}/{WEBHOOK}.service.yaml", service(repo)),
    ]
    if repo.platform.spec.webhook.network_policy.enabled:
        artifacts.append(Artifact(WORKLOADS, f"{WORKLOADS}/{WEBHOOK}.networkpolicy.yaml",
                                  network_policy(repo)))
    if cert_manager(repo):
        artifacts.insert(1, Artifact(ADMISSION, f"{ADMISSION}/webhook/{WEBHOOK}.certificate.yaml",
                                     certificate(repo)))
    else:
        artifacts.append(Artifact(WORKLOADS, f"{WORKLOADS}/{WEBHOOK_TLS_SECRET}.secret.yaml",
                                  tls_secret(repo)))
    return artifacts
