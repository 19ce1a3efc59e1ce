"""Least-privilege RBAC: one identity per component, each holding exactly what its code does.

Every verb below is there for a reason, and nothing else is (the integration test compares each
identity's effective permissions with this list, against the real API server):

Capacity controller (`fivespot-capacity-controller`, only when the repo has a consumer)
  - scheduledcapacities: get, list, watch — it reconciles them (informer cache).
  - scheduledcapacities/status: get, patch, update — all state lives in status (phase,
    conditions, written value); update for optimistic-concurrency writes, patch for the rest.
  - scheduledmachines: get, list, watch — host governance compares `spec.nodeName` with every
    `status.nodeRef.name` (one host, one governor).
  - every provider plural in spotschedules.5spot.finos.org: get, list, watch — it reads only the
    provider's status, never writes it (provider contract).
  - tenantcapacitylimits (policy.5spot.finos.org, when installed): get, list, watch — the
    tenant limits in force now: an object a tightened TenantPolicy denies gets nothing above
    them (it is handed back to 0 and reported), whatever admission let through earlier.
  - validatingadmissionpolicies and validatingadmissionpolicybindings
    (admissionregistration.k8s.io, when the output installs the VAPs): get, list, watch — which
    namespaces are tenants and which tenant's limits bind where, as the API server enforces
    them now (a namespace taken out of every TenantPolicy is handed back to 0 at once). Read
    only; admission configuration holds no secret.
  - each consumer's group/resource: get, list, watch — watch the target (drain counter,
    `TargetResolved`) from one cluster-wide informer per kind (per-namespace watches would cost
    one connection and two threads per tenant namespace and kind, and tenants number in the
    thousands: docs/design/decisions/0025-live-tenancy-and-namespaced-rights.md).
  - in each tenant namespace only (ClusterRole `fivespot-capacity-controller-tenants`, bound by a
    RoleBinding in every namespace of a TenantPolicy): each consumer's group/resource: patch —
    merge-patch the single gated field; for a Deployment, StatefulSet or ReplicaSet gated on
    `spec.replicas`, patch on `<resource>/scale` only (decision 0050), which the API server lets
    change that field and nothing else. A stolen token cannot scale kube-system's CoreDNS. No
    create (an unresolved target is a condition), no delete (drain belongs to the consumer), no
    Secrets, no CAPI: compromising this identity can change only the allowlisted resources, in
    tenant namespaces, and only by patching them. The RoleBinding is not pruned when its
    namespace leaves every TenantPolicy: the controller hands that namespace's capacity back to
    0 with it (`fivespot compile` warns, and says when to delete it).
  - horizontalpodautoscalers (autoscaling) and scaledobjects (keda.sh): get, list, watch — an
    autoscaler scaling a gated object is a second governor of the field (decision 0029).
  - events (events.k8s.io): create, patch — report handback timeouts and conflicts loudly where
    a person looks (`kubectl describe`); patch is how an event series is counted.
  - Role in the install namespace, leases (coordination.k8s.io): create, which RBAC cannot
    restrict by name (the name is not known before the object exists), and get, update on its
    own lease names only (one per partition) — leader election per partition — and list, watch
    on those names (a watch with a metadata.name field selector, which RBAC authorizes by name):
    a holder hears a standby at once.

Machine controller (`fivespot-machine-controller`, only when the repo has a MachineProvisioning)
  - scheduledmachines: get, list, watch; scheduledmachines/status: get, patch, update — it
    reconciles them and keeps all its state in status (a ScheduledMachine outside the declared
    clusters' namespaces is told so in its status).
  - every provider plural: get, list, watch — like the capacity controller, status only.
  - no ScheduledCapacity verb: a host both name is reported from the capacity side, whose
    identity already reads ScheduledMachines (the machine identity is not extended for capacity:
    docs/design/decisions/0001-one-identity-per-component.md).
  - events: create, patch; leases: as for the capacity controller.
  - a Role in each namespace of a declared CAPI Cluster, nowhere else:
    scheduledmachines: patch — to add and remove its finalizer (`5spot.finos.org/scheduledmachine`),
    so a deleted ScheduledMachine's machine leaves the cluster drained; only where it may create
    machines (it puts no finalizer on one it refuses). Patch would also reach the spec; that adds
    no power this identity lacks, since it already creates and deletes the Machines a spec
    describes. machines (cluster.x-k8s.io): get, list, watch, create, delete — it creates the Machine
    while the schedule is active and deletes it after the drain (watched per namespace, so no
    cluster-wide read); each declared bootstrap and infrastructure resource: get, create,
    delete — the objects the Machine references; secrets: get on exactly the declared
    clusters' `<cluster>-kubeconfig`, by name — CAPI's kubeconfig of the workload cluster,
    where the drain happens. No patch or update of any CAPI object, no other Secret, and
    nothing of the capacity side: this identity can never write a capacity field, and the
    capacity identity holds no CAPI verb.

Built-in provider (`fivespot-provider-<manual|time-based|capital-markets>`)
  - its own plural: get, list, watch — it reconciles its kind.
  - its own `<plural>/status`: get, update, patch — the only write of a provider is its status.
    No other provider's kind, and never the spec: a provider cannot forge another's decision.
  - CompositeSchedule (`fivespot-provider-composite`) also reads every provider plural: get,
    list, watch — its children's status, never their spec, and no write on any of them.
  - events: create, patch; leases: as for the capacity controller.

Custom provider kind (`fivespot-custom-provider-<plural>`, for the team's own Deployment)
  - its plural: get, list, watch; `<plural>/status`: get, update, patch — the contract's
    "read your kind, write only its status", nothing more (its controller is not ours, so it
    gets no events or leases from us).

Audit controller (`fivespot-audit-controller`, only when the repo has a consumer)
  - scheduledcapacities: get, list, watch; tenantcapacitylimits (when installed) and the
    ValidatingAdmissionPolicies and their bindings (when the output installs them): get, list,
    watch — what it judges, and the policies and tenant limits in force.
  - policyreports (wgpolicyk8s.io): get, list — the stored report of a namespace, and on taking
    a partition the earlier ones to clear; in each tenant namespace only (ClusterRole
    `fivespot-audit-controller-tenants`, a RoleBinding per tenant namespace, not pruned when the
    namespace leaves every TenantPolicy, as the capacity controller's): create, patch — one
    report per namespace, server-side applied; nothing else is written (no events, no status).
    Its own identity so that neither the capacity controller (no create at all) nor the webhook
    holds this.
  - leases: as for the capacity controller.

Webhook (`fivespot-webhook`, only when the repo has a consumer)
  - scheduledmachines: get, list, watch — the host-governance check at admission keeps a cache.
  - scheduledcapacities: get, list, watch — the field-governance check keeps a cache of which
    fields the existing ones govern (one field, one governor).
  - horizontalpodautoscalers (autoscaling) and scaledobjects (keda.sh): list — read when a
    ScheduledCapacity is created, to refuse one on a field an autoscaler scales (no cache).
  - with the VAP polyfill: namespaces get, list, watch (the policies' `namespaceObject`), and
    the params kind, when it is installed, get, list, watch (the policies' `params`).
  - self-managed certificates only: Role secrets get, update on `fivespot-webhook-tls` (fill,
    keep and rotate its CA and serving certificate). No create: it cannot be limited by name, and
    a webhook that could create Secrets could have a ServiceAccount token minted for another
    identity (security review F7); the Secret is in the compiled output, empty. And
    validatingwebhookconfigurations get, patch on `fivespot-webhook` only (inject the caBundle
    with a JSON patch). With cert-manager, cert-manager holds all of that and the webhook reads
    its mounted Secret: no Secret or webhook-configuration permission at all.

Rules are normalized (verbs merged per resource, then resources merged per verb set) and sorted,
so the output depends only on the permissions, not on the order consumers were declared in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from fivespot.api.fieldgovernance import through_scale
from fivespot.api.identities import (
    AUDIT_CONTROLLER,
    CAPACITY_CONTROLLER,
    MACHINE_CONTROLLER,
    WEBHOOK_CONFIGURATION,
    WEBHOOK_TLS_SECRET,
    kubeconfig_secret,
)
from fivespot.api.kinds import scheduled_capacity as scap
from fivespot.api.kinds import scheduled_machine
from fivespot.api.providers import BUILTIN_PROVIDERS
from fivespot.compiler.emit import crds
from fivespot.compiler.emit.admission import tenant_namespaces
from fivespot.compiler.emit.base import RBAC, Artifact, labels, metadata
from fivespot.compiler.emit.components import Component, components, custom_identities
from fivespot.compiler.repo import Repo
from fivespot.api.kinds.machine_lifecycle import CAPI_GROUP, MACHINES
from fivespot.compiler.spec import CertificateMode
from fivespot.policies.admission_eval import vap

RBAC_API: Final = "rbac.authorization.k8s.io/v1"
RBAC_GROUP: Final = "rbac.authorization.k8s.io"
EVENTS_GROUP: Final = "events.k8s.io"
COORDINATION_GROUP: Final = "coordination.k8s.io"
ADMISSIONREGISTRATION_GROUP: Final = "admissionregistration.k8s.io"
POD_SECURITY: Final = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
    "pod-security.kubernetes.io/warn": "restricted",
}

READ: Final = ("get", "list", "watch")
WRITE_STATUS: Final = ("get", "patch", "update")
REPORT: Final = ("create", "patch")


@dataclass(frozen=True)
class Rule:
    """One RBAC policy rule over a single API group."""

    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    names: tuple[str, ...] = ()

    def to_object(self) -> dict[str, Any]:
        rule: dict[str, Any] = {"apiGroups": [self.group], "resources": list(self.resources)}
        if self.names:
            rule["resourceNames"] = list(self.names)
        rule["verbs"] = list(self.verbs)
        return rule


def normalize(rules: list[Rule]) -> list[Rule]:
    """The same permissions in a canonical form: merged, de-duplicated and sorted."""
    verbs: dict[tuple[str, str, tuple[str, ...]], set[str]] = {}
    for rule in rules:
        for resource in rule.resources:
            key = (rule.group, resource, tuple(sorted(set(rule.names))))
            verbs.setdefault(key, set()).update(rule.verbs)
    resources: dict[tuple[str, tuple[str, ...], tuple[str, ...]], set[str]] = {}
    for (group, resource, names), verb_set in verbs.items():
        resources.setdefault((group, tuple(sorted(verb_set)), names), set()).add(resource)
    merged = [Rule(group, tuple(sorted(found)), verb_tuple, names)
              for (group, verb_tuple, names), found in resources.items()]
    return sorted(merged, key=lambda r: (r.group, r.resources, r.names, r.verbs))


# --- what each identity may do ----------------------------------------------------------------


def _events() -> Rule:
    return Rule(EVENTS_GROUP, ("events",), REPORT)


def _provider_plurals(repo: Repo) -> tuple[str, ...]:
    return tuple(sorted(info.plural for info in crds.provider_infos(repo)))


def _consumer_rules(repo: Repo, verbs: tuple[str, ...]) -> list[Rule]:
    by_group: dict[str, set[str]] = {}
    for consumer in repo.consumers:
        by_group.setdefault(consumer.spec.group, set()).add(consumer.spec.resource)
    return [Rule(group, tuple(sorted(resources)), verbs)
            for group, resources in sorted(by_group.items())]


def _gated_field_rules(repo: Repo) -> list[Rule]:
    """patch on each consumer's resource, or on its `/scale` subresource alone where the field is
    written through it (`fieldgovernance.through_scale`): then this identity cannot change any
    other field of those objects at all."""
    by_group: dict[str, set[str]] = {}
    for consumer in repo.consumers:
        spec = consumer.spec
        scale = through_scale(spec.group, spec.kind, spec.capacity_paths)
        by_group.setdefault(spec.group, set()).add(f"{spec.resource}/scale" if scale else spec.resource)
    return [Rule(group, tuple(sorted(resources)), ("patch",))
            for group, resources in sorted(by_group.items())]


AUTOSCALER_RESOURCES: Final = (("autoscaling", "horizontalpodautoscalers"), ("keda.sh", "scaledobjects"))
"""The governors of a field fivespot does not run (`fivespot.api.fieldgovernance.AUTOSCALERS`): the
capacity controller watches them, the webhook lists them (decision record 0029)."""


def capacity_rules(repo: Repo) -> list[Rule]:
    rules = [
        *(Rule(group, (plural,), READ) for group, plural in AUTOSCALER_RESOURCES),
        Rule(scap.GROUP, (scap.PLURAL,), READ),
        Rule(scap.GROUP, (f"{scap.PLURAL}/status",), WRITE_STATUS),
        Rule(scheduled_machine.GROUP, (scheduled_machine.PLURAL,), READ),
        _events(),
    ]
    if plurals := _provider_plurals(repo):
        rules.append(Rule(scap.PROVIDER_GROUP, plurals, READ))
    return normalize(rules + _in_force_rules(repo) + _consumer_rules(repo, READ))


CREATE_DELETE: Final = ("create", "delete", "get")


POLICY_REPORTS_GROUP: Final = "wgpolicyk8s.io"


def audit_rules(repo: Repo) -> list[Rule]:
    rules = [Rule(scap.GROUP, (scap.PLURAL,), READ),
             Rule(POLICY_REPORTS_GROUP, ("policyreports",), ("get", "list"))]
    return normalize(rules + _in_force_rules(repo))


def tenant_rules(repo: Repo, component: Component) -> list[Rule]:
    """What a controller may write in a tenant namespace and nowhere else: the capacity
    controller its consumers' gated field, the audit controller its reports."""
    if component.name == CAPACITY_CONTROLLER:
        return normalize(_gated_field_rules(repo))
    if component.audits:
        return [Rule(POLICY_REPORTS_GROUP, ("policyreports",), ("create", "patch"))]
    return []


def tenant_role_name(component: str) -> str:
    return f"{component}-tenants"


TENANT_ROLES: Final = tuple(tenant_role_name(c) for c in (CAPACITY_CONTROLLER, AUDIT_CONTROLLER))
"""The ClusterRoles bound in every tenant namespace (`tenant_identity`)."""


def tenant_identity(repo: Repo, component: Component) -> list[Artifact]:
    """A ClusterRole of `tenant_rules`, bound by a RoleBinding in each tenant namespace. The
    bindings are unpruned: when a namespace leaves every TenantPolicy, its objects are handed back
    to 0 and reported with them (`compile_warnings.dropped_tenant_bindings` says when to delete
    one), and a GitOps engine that prunes the RBAC layer before it updates the policies (Flux's
    dependsOn chain) would otherwise take that right away first."""
    rules = tenant_rules(repo, component)
    if not rules or not repo.tenants:
        return []
    name = tenant_role_name(component.name)
    artifacts = [_artifact(_role("ClusterRole", name, component.name, rules))]
    for ns in tenant_namespaces(repo):
        binding = _binding("RoleBinding", "ClusterRole", name, component.name, component.name,
                           repo.namespace, ns)
        artifacts.append(Artifact(RBAC, tenant_binding_path(ns, name), binding, unpruned=True))
    return artifacts


def tenant_binding_path(namespace: str, name: str) -> str:
    return f"{RBAC}/{namespace}/{name}.rolebinding.yaml"


def machine_rules(repo: Repo) -> list[Rule]:
    rules = [
        Rule(scheduled_machine.GROUP, (scheduled_machine.PLURAL,), READ),
        Rule(scheduled_machine.GROUP, (f"{scheduled_machine.PLURAL}/status",), WRITE_STATUS),
        _events(),
    ]
    if plurals := _provider_plurals(repo):
        rules.append(Rule(scap.PROVIDER_GROUP, plurals, READ))
    return normalize(rules)


def machine_namespace_rules(repo: Repo, namespace: str) -> list[Rule]:
    """What the machine controller may do in one namespace of a declared CAPI Cluster."""
    assert repo.machines is not None
    spec = repo.machines.spec
    rules = [Rule(CAPI_GROUP, (MACHINES,), READ + ("create", "delete")),
             Rule(scheduled_machine.GROUP, (scheduled_machine.PLURAL,), ("patch",))]
    for kind in spec.bootstrap + spec.infrastructure:
        rules.append(Rule(kind.group, (kind.resource,), CREATE_DELETE))
    secrets = tuple(sorted(kubeconfig_secret(c.name) for c in spec.clusters
                           if c.namespace == namespace))
    rules.append(Rule("", ("secrets",), ("get",), secrets))
    return normalize(rules)


def machine_tenant_role_name() -> str:
    return f"{MACHINE_CONTROLLER}-capi"


def machine_tenant_identity(repo: Repo, component: Component) -> list[Artifact]:
    """A Role and RoleBinding in each namespace of a declared cluster."""
    if repo.machines is None:
        return []
    name = machine_tenant_role_name()
    artifacts = []
    for ns in repo.machines.spec.namespaces:
        for obj in (_role("Role", name, component.name, machine_namespace_rules(repo, ns), ns),
                    _binding("RoleBinding", "Role", name, component.name, component.name,
                             repo.namespace, ns)):
            artifacts.append(Artifact(
                RBAC, f"{RBAC}/{ns}/{name}.{obj['kind'].lower()}.yaml", obj))
    return artifacts


def provider_rules(plural: str, *, reports: bool) -> list[Rule]:
    rules = [Rule(scap.PROVIDER_GROUP, (plural,), READ),
             Rule(scap.PROVIDER_GROUP, (f"{plural}/status",), WRITE_STATUS)]
    return normalize(rules + [_events()] if reports else rules)


def _self_managed_tls(repo: Repo) -> bool:
    return repo.platform.spec.webhook.certificate.mode is CertificateMode.SELF_MANAGED


def _in_force_rules(repo: Repo) -> list[Rule]:
    """What the capacity and audit controllers read to judge by the policies in force
    (`fivespot.controllers.inforce`): the tenant limits, and the policies and bindings as installed."""
    rules = []
    if _params_installed(repo):
        rules.append(Rule(crds.TENANT_LIMIT.group, (crds.TENANT_LIMIT.plural,), READ))
    if repo.emits_vaps:
        rules.append(Rule(vap.GROUP, (vap.POLICY_PLURAL, vap.BINDING_PLURAL), READ))
    return rules


def _params_installed(repo: Repo) -> bool:
    return any(info.name == crds.TENANT_LIMIT.name for info in crds.kinds(repo))


def webhook_rules(repo: Repo) -> list[Rule]:
    rules = [Rule(scheduled_machine.GROUP, (scheduled_machine.PLURAL,), READ),
             Rule(scap.GROUP, (scap.PLURAL,), READ),
             *(Rule(group, (plural,), ("list",)) for group, plural in AUTOSCALER_RESOURCES)]
    if repo.polyfill:
        rules.append(Rule("", ("namespaces",), READ))
        if _params_installed(repo):
            rules.append(Rule(crds.TENANT_LIMIT.group, (crds.TENANT_LIMIT.plural,), READ))
    if _self_managed_tls(repo):
        rules.append(Rule(ADMISSIONREGISTRATION_GROUP, ("validatingwebhookconfigurations",),
                          ("get", "patch"), (WEBHOOK_CONFIGURATION,)))
    return normalize(rules)


def lease_rules(component: Component) -> list[Rule]:
    return normalize([Rule(COORDINATION_GROUP, ("leases",), ("create",)),
                      Rule(COORDINATION_GROUP, ("leases",), ("get", "list", "update", "watch"),
                           component.leases)])


def webhook_namespace_rules(repo: Repo) -> list[Rule]:
    if not _self_managed_tls(repo):
        return []
    # No `create`: it cannot be limited by name (security review F7); the Secret is compiled.
    return normalize([Rule("", ("secrets",), ("get", "update"), (WEBHOOK_TLS_SECRET,))])


def cluster_rules(repo: Repo, component: Component) -> list[Rule]:
    if component.provider_kind is not None:
        rules = provider_rules(crds.builtin_provider(component.provider_kind).plural, reports=True)
        if BUILTIN_PROVIDERS[component.provider_kind].reads_providers:
            rules = normalize(rules + [Rule(scap.PROVIDER_GROUP, _provider_plurals(repo), READ)])
        return rules
    if component.serves_admission:
        return webhook_rules(repo)
    if component.reconciles_machines:
        return machine_rules(repo)
    if component.audits:
        return audit_rules(repo)
    return capacity_rules(repo)


def namespace_rules(repo: Repo, component: Component) -> list[Rule]:
    if component.serves_admission:
        return webhook_namespace_rules(repo)
    return lease_rules(component)


# --- objects ------------------------------------------------------------------------------------


def namespace(repo: Repo) -> dict[str, Any]:
    meta = metadata(repo.namespace, "fivespot")
    meta["labels"] = {**labels("fivespot"), **POD_SECURITY}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def _role(kind: str, name: str, component: str, rules: list[Rule],
          ns: str | None = None) -> dict[str, Any]:
    return {"apiVersion": RBAC_API, "kind": kind, "metadata": metadata(name, component, ns),
            "rules": [r.to_object() for r in rules]}


def _binding(kind: str, role_kind: str, name: str, component: str, subject: str, install_ns: str,
             ns: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API, "kind": kind, "metadata": metadata(name, component, ns),
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": subject, "namespace": install_ns}],
    }


def _artifact(obj: dict[str, Any]) -> Artifact:
    return Artifact(RBAC, f"{RBAC}/{obj['metadata']['name']}.{obj['kind'].lower()}.yaml", obj)


def cluster_identity(name: str, rules: list[Rule], install_ns: str) -> list[Artifact]:
    """A ClusterRole and its binding to the ServiceAccount of the same name."""
    return [_artifact(_role("ClusterRole", name, name, rules)),
            _artifact(_binding("ClusterRoleBinding", "ClusterRole", name, name, name, install_ns))]


def namespace_role_name(component: Component) -> str:
    return f"{component.name}-tls" if component.serves_admission else f"{component.name}-leases"


def namespace_identity(repo: Repo, component: Component) -> list[Artifact]:
    """A Role in the install namespace (leases, or the webhook's Secret) and its binding."""
    rules = namespace_rules(repo, component)
    if not rules:
        return []
    name, ns = namespace_role_name(component), repo.namespace
    return [_artifact(_role("Role", name, component.name, rules, ns)),
            _artifact(_binding("RoleBinding", "Role", name, component.name, component.name, ns, ns))]


def emit(repo: Repo) -> list[Artifact]:
    artifacts = [Artifact(RBAC, f"{RBAC}/namespace.yaml", namespace(repo))]
    for component in components(repo):
        artifacts += cluster_identity(component.name, cluster_rules(repo, component), repo.namespace)
        artifacts += namespace_identity(repo, component)
        artifacts += tenant_identity(repo, component)
        if component.reconciles_machines:
            artifacts += machine_tenant_identity(repo, component)
    for identity, provider in custom_identities(repo):
        artifacts += cluster_identity(identity, provider_rules(provider.plural_name, reports=False),
                                      repo.namespace)
    return artifacts
