"""The RBAC emitter grants each identity exactly what its component does, and nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from fivespot.api.identities import lease_name
from fivespot.api.providers import BuiltinProvider
from fivespot.compiler.emit import rbac, workloads
from fivespot.compiler.emit.base import RBAC, Artifact
from fivespot.compiler.repo import Repo
from fivespot.compiler.spec import CapacityConsumer, CustomProvider, Platform, TenantPolicy

API = "config.5spot.finos.org/v1alpha1"
NS = "fivespot-test"
CAPACITY = "fivespot-capacity-controller"
WEBHOOK = "fivespot-webhook"
ALL_BUILTIN = tuple(BuiltinProvider)


def platform(**spec: Any) -> Platform:
    return Platform.model_validate({"apiVersion": API, "kind": "Platform",
                                    "metadata": {"name": "platform"},
                                    "spec": {"namespace": NS, "image": "example/fivespot:1", **spec}})


def consumer(name: str, group: str, resource: str) -> CapacityConsumer:
    return CapacityConsumer.model_validate({
        "apiVersion": API, "kind": "CapacityConsumer", "metadata": {"name": name},
        "spec": {"group": group, "version": "v1", "kind": resource.capitalize()[:-1],
                 "resource": resource, "capacityPaths": ["spec.replicas"],
                 "maxActiveValue": 10}})


def tenant(name: str, consumers: list[str]) -> TenantPolicy:
    return TenantPolicy.model_validate({
        "apiVersion": API, "kind": "TenantPolicy", "metadata": {"name": name},
        "spec": {"namespaces": [name], "consumers": consumers, "maxActiveValue": 5}})


CONSUMERS = (
    consumer("pools", "pools.example.com", "pools"),
    consumer("warm", "agents.example.com", "warmpools"),
    consumer("sandboxes", "agents.example.com", "sandboxes"),
)
CUSTOM = CustomProvider.model_validate({"kind": "ChangeFreeze", "specSchema": {"type": "object"}})


def make_repo(consumers: tuple[CapacityConsumer, ...] = CONSUMERS,
              builtin: tuple[BuiltinProvider, ...] = ALL_BUILTIN,
              custom: tuple[CustomProvider, ...] = (CUSTOM,),
              tenants: tuple[TenantPolicy, ...] = (), **spec: Any) -> Repo:
    return Repo(platform=platform(**spec), consumers=consumers, builtin_providers=builtin,
                custom_providers=custom, tenants=tenants, fixtures=())


def objects(repo: Repo, kind: str) -> dict[str, dict[str, Any]]:
    return {a.name: a.obj for a in rbac.emit(repo) if a.kind == kind}


def grants(role: dict[str, Any]) -> set[tuple[str, str, str, tuple[str, ...]]]:
    """Every (group, resource, verb, resourceNames) a role allows, one tuple per verb."""
    return {(group, resource, verb, tuple(rule.get("resourceNames", ())))
            for rule in role["rules"] for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]}


def all_grants(repo: Repo, subject: str) -> set[tuple[str, str, str, tuple[str, ...]]]:
    """What the ServiceAccount `subject` gets from every role bound to it."""
    roles = {(a.kind, a.name): a.obj for a in rbac.emit(repo) if a.kind in ("ClusterRole", "Role")}
    found = set()
    for artifact in rbac.emit(repo):
        if artifact.kind.endswith("Binding") and any(
                s["name"] == subject for s in artifact.obj["subjects"]):
            ref = artifact.obj["roleRef"]
            found |= grants(roles[(ref["kind"], ref["name"])])
    return found


def grants_in(repo: Repo, subject: str, namespace: str) -> set[tuple[str, str, str, tuple[str, ...]]]:
    """What the ServiceAccount `subject` may do in `namespace`: its ClusterRoleBindings' roles
    and the roles its RoleBindings in that namespace bind."""
    roles = {(a.kind, a.name): a.obj for a in rbac.emit(repo) if a.kind in ("ClusterRole", "Role")}
    found = set()
    for artifact in rbac.emit(repo):
        binding = artifact.obj
        if artifact.kind == "RoleBinding" and binding["metadata"]["namespace"] != namespace:
            continue
        if artifact.kind.endswith("Binding") and any(s["name"] == subject for s in binding["subjects"]):
            found |= grants(roles[(binding["roleRef"]["kind"], binding["roleRef"]["name"])])
    return found


TENANTS = (tenant("team-a", ["pools"]), tenant("team-b", ["warm", "sandboxes"]))
CONSUMER_RESOURCES = {("pools.example.com", "pools"), ("agents.example.com", "sandboxes"),
                      ("agents.example.com", "warmpools")}


def test_the_capacity_identity_patches_the_consumers_in_tenant_namespaces_and_nowhere_else() -> None:
    repo = make_repo(tenants=TENANTS)

    def patched(namespace: str) -> set[tuple[str, str]]:
        return {(g, r) for g, r, verb, _ in grants_in(repo, CAPACITY, namespace) if verb == "patch"}

    own = {("5spot.finos.org", "scheduledcapacities/status"), ("events.k8s.io", "events")}
    for namespace in ("team-a", "team-b"):
        assert patched(namespace) == own | CONSUMER_RESOURCES
    for namespace in ("kube-system", NS, "someone-else"):
        assert patched(namespace) == own


def apps(kind: str, resource: str, paths: tuple[str, ...] = ("spec.replicas",)) -> CapacityConsumer:
    return CapacityConsumer.model_validate({
        "apiVersion": API, "kind": "CapacityConsumer", "metadata": {"name": resource},
        "spec": {"group": "apps", "version": "v1", "kind": kind, "resource": resource,
                 "capacityPaths": list(paths), "maxActiveValue": 10}})


def test_a_deployment_gated_on_its_replicas_is_patched_through_its_scale_subresource_only() -> None:
    consumers = (apps("Deployment", "deployments"), apps("StatefulSet", "statefulsets"),
                 apps("ReplicaSet", "replicasets", ("spec.replicas", "spec.minReadySeconds")),
                 CONSUMERS[0])
    repo = make_repo(consumers=consumers, tenants=(tenant("team-a", ["deployments"]),))
    patched = {(g, r) for g, r, verb, _ in grants_in(repo, CAPACITY, "team-a") if verb == "patch"}
    assert {("apps", "deployments/scale"), ("apps", "statefulsets/scale"),
            ("apps", "replicasets"), ("pools.example.com", "pools")} <= patched
    assert not {("apps", "deployments"), ("apps", "statefulsets"), ("apps", "replicasets/scale")} & patched
    read = {(g, r) for g, r, verb, _ in all_grants(repo, CAPACITY) if verb == "watch"}
    assert {("apps", "deployments"), ("apps", "statefulsets")} <= read


def test_consumer_resources_are_grouped_by_api_group_and_sorted() -> None:
    roles = objects(make_repo(tenants=TENANTS), "ClusterRole")
    for name, verbs in ((CAPACITY, ["get", "list", "watch"]), (f"{CAPACITY}-tenants", ["patch"])):
        agents = [r for r in roles[name]["rules"] if r["apiGroups"] == ["agents.example.com"]]
        assert agents == [{"apiGroups": ["agents.example.com"],
                           "resources": ["sandboxes", "warmpools"], "verbs": verbs}]


def test_each_tenant_namespace_binds_the_capacity_and_audit_tenant_roles_and_keeps_them_when_pruned(
) -> None:
    emitted = rbac.emit(make_repo(tenants=TENANTS))
    bindings = {(a.obj["metadata"]["namespace"], a.name): a for a in emitted
                if a.kind == "RoleBinding" and a.obj["roleRef"]["kind"] == "ClusterRole"}
    assert set(bindings) == {(ns, f"{c}-tenants") for ns in ("team-a", "team-b")
                             for c in (CAPACITY, "fivespot-audit-controller")}
    for (ns, name), binding in bindings.items():
        assert binding.unpruned and binding.path == f"rbac/{ns}/{name}.rolebinding.yaml"
        assert binding.obj["roleRef"]["name"] == name
    assert not [a for a in rbac.emit(make_repo()) if a.name.endswith("-tenants")], "no tenant: none"


def test_the_audit_identity_writes_reports_only_in_tenant_namespaces() -> None:
    repo = make_repo(tenants=TENANTS)
    audit = "fivespot-audit-controller"
    reports = "wgpolicyk8s.io"
    assert {v for g, _, v, _ in grants_in(repo, audit, "team-a") if g == reports} == {
        "create", "get", "list", "patch"}
    assert {v for g, _, v, _ in grants_in(repo, audit, "kube-system") if g == reports} == {
        "get", "list"}


def test_the_capacity_identity_has_no_create_delete_secrets_or_capi_anywhere() -> None:
    granted = all_grants(make_repo(), CAPACITY)
    assert {(g, r) for g, r, verb, _ in granted if verb == "create"} == {
        ("events.k8s.io", "events"), ("coordination.k8s.io", "leases")}
    assert not {v for _, _, v, _ in granted} & {"delete", "deletecollection", "escalate", "bind",
                                                "impersonate", "*"}
    assert not [g for g in granted if g[1] == "secrets" or "cluster.x-k8s.io" in g[0]]


def test_the_capacity_identity_reads_what_it_reconciles_and_every_provider_kind() -> None:
    reads = {(g, r) for g, r, verb, _ in all_grants(make_repo(), CAPACITY) if verb == "watch"}
    assert reads == {
        ("5spot.finos.org", "scheduledcapacities"), ("5spot.finos.org", "scheduledmachines"),
        ("spotschedules.5spot.finos.org", "capitalmarketsschedules"),
        ("spotschedules.5spot.finos.org", "compositeschedules"),
        ("spotschedules.5spot.finos.org", "changefreezes"),
        ("spotschedules.5spot.finos.org", "manualschedules"),
        ("spotschedules.5spot.finos.org", "timebasedspotschedules"),
        ("pools.example.com", "pools"), ("agents.example.com", "sandboxes"),
        ("agents.example.com", "warmpools"),
        ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
        ("autoscaling", "horizontalpodautoscalers"), ("keda.sh", "scaledobjects"),
        ("coordination.k8s.io", "leases")}  # its own Lease names only (decision 0034)


@pytest.mark.parametrize("enforcement,expected", [
    ("vap", {"validatingadmissionpolicies", "validatingadmissionpolicybindings"}),
    ("both", {"validatingadmissionpolicies", "validatingadmissionpolicybindings"}),
    ("webhook", set()),
])
def test_the_capacity_and_audit_identities_read_the_installed_policies_only_when_the_vaps_are(
        enforcement: str, expected: set[str]) -> None:
    repo = make_repo(enforcement=enforcement)
    for identity in (CAPACITY, "fivespot-audit-controller"):
        assert {r for g, r, verb, _ in all_grants(repo, identity)
                if g == "admissionregistration.k8s.io"} == expected
        assert {v for g, _, v, _ in all_grants(repo, identity)
                if g == "admissionregistration.k8s.io"} <= {"get", "list", "watch"}


def test_no_rule_anywhere_uses_a_wildcard() -> None:
    for artifact in rbac.emit(make_repo(enforcement="both", tenants=(tenant("team-a", ["pools"]),))):
        for rule in artifact.obj.get("rules", []):
            for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(field, []), (artifact.path, rule)


@pytest.mark.parametrize("partitions", [[{"name": "default"}],
                                        [{"name": "default"}, {"name": "emea", "namespaces": ["x"]}]])
def test_leases_may_be_created_but_only_the_components_own_leases_are_read_watched_or_renewed(
        partitions: list[dict[str, Any]]) -> None:
    repo = make_repo(partitions=partitions)
    roles = objects(repo, "Role")
    for component in (CAPACITY, "fivespot-provider-manual"):
        own = tuple(sorted(lease_name(component, p["name"]) for p in partitions))
        assert roles[f"{component}-leases"]["metadata"]["namespace"] == NS
        assert grants(roles[f"{component}-leases"]) == {
            ("coordination.k8s.io", "leases", "create", ()),
            *{("coordination.k8s.io", "leases", verb, own)
              for verb in ("get", "list", "update", "watch")}}


@pytest.mark.parametrize("kind,plural", [
    (BuiltinProvider.MANUAL, "manualschedules"),
    (BuiltinProvider.TIME_BASED, "timebasedspotschedules"),
    (BuiltinProvider.CAPITAL_MARKETS, "capitalmarketsschedules"),
])
def test_each_builtin_provider_reads_its_kind_and_writes_only_its_own_status(
        kind: BuiltinProvider, plural: str) -> None:
    identity = {BuiltinProvider.MANUAL: "fivespot-provider-manual",
                BuiltinProvider.TIME_BASED: "fivespot-provider-time-based",
                BuiltinProvider.CAPITAL_MARKETS: "fivespot-provider-capital-markets"}[kind]
    granted = all_grants(make_repo(), identity)
    group = "spotschedules.5spot.finos.org"
    assert {g for g in granted if g[0] == group} == {
        *{(group, plural, verb, ()) for verb in ("get", "list", "watch")},
        *{(group, f"{plural}/status", verb, ()) for verb in ("get", "patch", "update")}}
    assert {(g, r) for g, r, _, _ in granted} == {
        (group, plural), (group, f"{plural}/status"), ("events.k8s.io", "events"),
        ("coordination.k8s.io", "leases")}


def test_the_composite_provider_reads_every_provider_kind_and_writes_only_its_own_status() -> None:
    granted = all_grants(make_repo(), "fivespot-provider-composite")
    group = "spotschedules.5spot.finos.org"
    plurals = ("capitalmarketsschedules", "changefreezes", "compositeschedules", "manualschedules",
               "timebasedspotschedules")
    assert {g for g in granted if g[0] == group} == {
        *{(group, plural, verb, ()) for plural in plurals for verb in ("get", "list", "watch")},
        *{(group, "compositeschedules/status", verb, ()) for verb in ("get", "patch", "update")}}
    assert {g for g, _, _, _ in granted} == {group, "events.k8s.io", "coordination.k8s.io"}


def test_a_custom_provider_identity_reads_its_kind_and_writes_only_its_status() -> None:
    roles = objects(make_repo(), "ClusterRole")
    group = "spotschedules.5spot.finos.org"
    assert grants(roles["fivespot-custom-provider-changefreezes"]) == {
        *{(group, "changefreezes", verb, ()) for verb in ("get", "list", "watch")},
        *{(group, "changefreezes/status", verb, ()) for verb in ("get", "patch", "update")}}
    assert all_grants(make_repo(), "fivespot-custom-provider-changefreezes") == grants(
        roles["fivespot-custom-provider-changefreezes"])


def test_a_repo_without_consumers_has_no_capacity_or_webhook_identity() -> None:
    repo = make_repo(consumers=())
    names = {a.name for a in rbac.emit(repo)}
    assert not {n for n in names if n.startswith((CAPACITY, WEBHOOK))}
    assert "fivespot-provider-manual" in names


AUTOSCALERS_LISTED = {("autoscaling", "horizontalpodautoscalers", "list", ()),
                      ("keda.sh", "scaledobjects", "list", ())}
"""The webhook lists a namespace's autoscalers when a ScheduledCapacity is created (0029)."""


def test_the_self_managed_webhook_touches_only_its_own_secret_and_configuration() -> None:
    granted = all_grants(make_repo(), WEBHOOK)
    assert granted == {
        *{("5spot.finos.org", r, v, ()) for v in ("get", "list", "watch")
          for r in ("scheduledmachines", "scheduledcapacities")},
        *{("", "secrets", v, ("fivespot-webhook-tls",)) for v in ("get", "update")},
        *{("admissionregistration.k8s.io", "validatingwebhookconfigurations", v,
           ("fivespot-webhook",)) for v in ("get", "patch")}, *AUTOSCALERS_LISTED}
    assert objects(make_repo(), "Role")["fivespot-webhook-tls"]["metadata"]["namespace"] == NS


def test_cert_manager_mode_gives_the_webhook_no_secret_or_configuration_permission() -> None:
    repo = make_repo(webhook={"certificate": {"mode": "cert-manager",
                                              "issuerRef": {"kind": "ClusterIssuer", "name": "ca"}}})
    assert all_grants(repo, WEBHOOK) == {
        *{("5spot.finos.org", r, v, ()) for v in ("get", "list", "watch")
          for r in ("scheduledmachines", "scheduledcapacities")}, *AUTOSCALERS_LISTED}
    assert "fivespot-webhook-tls" not in objects(repo, "Role")


@pytest.mark.parametrize("enforcement,tenants,expected", [
    ("vap", True, set()),
    ("webhook", True, {("", "namespaces")}),
    ("both", False, {("", "namespaces")}),
    ("both", True, {("", "namespaces"), ("policy.5spot.finos.org", "tenantcapacitylimits")}),
])
def test_the_webhook_reads_namespaces_and_params_only_for_the_polyfill_and_params_only_if_installed(
        enforcement: str, tenants: bool, expected: set[tuple[str, str]]) -> None:
    repo = make_repo(enforcement=enforcement,
                     tenants=(tenant("team-a", ["pools"]),) if tenants else ())
    reads = {(g, r) for g, r, verb, _ in all_grants(repo, WEBHOOK) if verb == "list"}
    assert reads - {("5spot.finos.org", "scheduledmachines"),
                    ("5spot.finos.org", "scheduledcapacities"),
                    *{(g, r) for g, r, _, _ in AUTOSCALERS_LISTED}} == expected


def test_every_binding_binds_an_emitted_role_to_an_emitted_service_account_in_the_install_namespace(
) -> None:
    repo = make_repo()
    emitted = rbac.emit(repo)
    roles = {(a.kind, a.name) for a in emitted if a.kind in ("ClusterRole", "Role")}
    accounts = {a.name for a in workloads.emit(repo) if a.kind == "ServiceAccount"}
    bindings = [a.obj for a in emitted if a.kind.endswith("Binding")]
    assert len(bindings) == len(roles)
    for binding in bindings:
        assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) in roles
        assert binding["roleRef"]["apiGroup"] == "rbac.authorization.k8s.io"
        [subject] = binding["subjects"]
        assert subject == {"kind": "ServiceAccount", "name": subject["name"], "namespace": NS}
        assert subject["name"] in accounts
    assert {s for s in accounts} == {b["subjects"][0]["name"] for b in bindings}


def test_the_install_namespace_enforces_the_restricted_pod_security_standard() -> None:
    [namespace] = [a for a in rbac.emit(make_repo()) if a.kind == "Namespace"]
    assert namespace.path == "rbac/namespace.yaml"
    assert namespace.name == NS
    assert namespace.obj["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_every_object_lives_in_the_rbac_layer_at_a_path_of_its_own() -> None:
    emitted: list[Artifact] = rbac.emit(make_repo())
    assert all(a.layer == RBAC and a.path.startswith("rbac/") for a in emitted)
    assert len({a.path for a in emitted}) == len(emitted)
    assert "rbac/fivespot-capacity-controller.clusterrole.yaml" in {a.path for a in emitted}


def test_output_is_deterministic_whatever_order_consumers_and_providers_are_listed_in() -> None:
    forward = make_repo()
    backward = make_repo(consumers=tuple(reversed(CONSUMERS)), builtin=tuple(reversed(ALL_BUILTIN)))
    assert rbac.emit(forward) == rbac.emit(forward)
    assert rbac.emit(forward) == rbac.emit(backward)


def test_normalize_merges_verbs_and_resources_into_one_canonical_form() -> None:
    rules = [rbac.Rule("g", ("b",), ("watch", "get")), rbac.Rule("g", ("a",), ("get",)),
             rbac.Rule("g", ("a",), ("watch",)), rbac.Rule("g", ("a",), ("get",), ("only",))]
    assert rbac.normalize(rules) == [rbac.Rule("g", ("a",), ("get",), ("only",)),
                                     rbac.Rule("g", ("a", "b"), ("get", "watch"))]
    assert rbac.normalize(list(reversed(rules))) == rbac.normalize(rules)


def test_an_external_custom_kind_is_read_by_its_consumers_and_gets_no_identity_or_crd() -> None:
    from fivespot.compiler.emit import crds

    external = CustomProvider.model_validate({"kind": "ManualSchedule", "crd": "external"})
    repo = make_repo(builtin=(), custom=(CUSTOM, external))
    group = "spotschedules.5spot.finos.org"
    assert {(group, "manualschedules", verb, ()) for verb in ("get", "list", "watch")} <= \
        all_grants(repo, CAPACITY)
    names = {a.name for a in rbac.emit(repo)}
    assert "fivespot-custom-provider-changefreezes" in names
    assert not {n for n in names if "manualschedules" in n}
    assert [k.kind for k in crds.kinds(repo) if k.group == group] == ["ChangeFreeze"]
