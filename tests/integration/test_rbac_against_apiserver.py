"""The compiled RBAC, applied to the real API server, grants each identity exactly its intended
permissions: what `kubectl auth can-i --list` reports for the ServiceAccount, minus what a
ServiceAccount with no bindings at all gets, equals a set written out by hand here.

The intended sets are spelled out independently of the emitter on purpose: a test that derived
them from the emitted rules would pass whatever the emitter granted.
"""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from fivespot.api.providers import BuiltinProvider
from fivespot.compiler.emit import rbac, webhook, workloads
from fivespot.compiler.output import to_yaml
from fivespot.compiler.repo import Repo
from fivespot.compiler.spec import (
    CapacityConsumer,
    CustomProvider,
    Platform,
    TenantPolicy,
)
from fivespot.devcluster.clients import admin_client
from fivespot.devcluster.localrun import ensure_namespaces
from tests.integration.authorizer import wait_in_force
from tests.integration.conftest import AsServiceAccount

API = "config.5spot.finos.org/v1alpha1"
CAPACITY = "fivespot-capacity-controller"
MANUAL = "fivespot-provider-manual"
CUSTOM = "fivespot-custom-provider-changefreezes"
WEBHOOK = "fivespot-webhook"
READ = ("get", "list", "watch")
WRITE_STATUS = ("get", "patch", "update")
TENANT, INSTALL, OTHER = "a tenant namespace", "the install namespace", "another namespace"

Permission = tuple[str, tuple[str, ...], str]
"""(resource as kubectl prints it, resource names, verb)."""


# --- the repo under test -------------------------------------------------------------------------


def make_repo(install: str, tenant: str, group: str, webhook: dict[str, Any] | None = None,
              target: tuple[str, str, str] = ("v1", "Pool", "pools")) -> Repo:
    """A repo whose one consumer is `target` (version, kind, resource) of `group`, and whose one
    TenantPolicy covers namespace `tenant`."""
    platform = Platform.model_validate({
        "apiVersion": API, "kind": "Platform", "metadata": {"name": "platform"},
        "spec": {"namespace": install, "image": "example/fivespot:1", "enforcement": "both",
                 "webhook": webhook or {}}})
    version, kind, resource = target
    consumer = CapacityConsumer.model_validate({
        "apiVersion": API, "kind": "CapacityConsumer", "metadata": {"name": "pools"},
        "spec": {"group": group, "version": version, "kind": kind, "resource": resource,
                 "capacityPaths": ["spec.replicas"], "maxActiveValue": 10}})
    policy = TenantPolicy.model_validate({
        "apiVersion": API, "kind": "TenantPolicy", "metadata": {"name": "tenant"},
        "spec": {"namespaces": [tenant], "consumers": ["pools"], "maxActiveValue": 5}})
    custom = CustomProvider.model_validate({"kind": "ChangeFreeze", "specSchema": {"type": "object"}})
    return Repo(platform=platform, consumers=(consumer,),
                builtin_providers=(BuiltinProvider.MANUAL,), custom_providers=(custom,),
                tenants=(policy,), fixtures=())


def intended(identity: str, group: str, where: str) -> set[Permission]:
    """What each identity is meant to hold in a namespace of `where` (TENANT, INSTALL or OTHER),
    written out by hand."""
    in_install_namespace = where == INSTALL
    def each(resource: str, verbs: tuple[str, ...], names: tuple[str, ...] = ()) -> set[Permission]:
        return {(resource, names, verb) for verb in verbs}

    events = each("events.events.k8s.io", ("create", "patch"))
    leases = (each("leases.coordination.k8s.io", ("create",))
              | each("leases.coordination.k8s.io", ("get", "list", "update", "watch"),
                     (f"{identity}-default",)))
    found: set[Permission]
    if identity == CAPACITY:
        found = (each("scheduledcapacities.5spot.finos.org", READ)
                 | each("scheduledcapacities.5spot.finos.org/status", WRITE_STATUS)
                 | each("scheduledmachines.5spot.finos.org", READ)
                 | each("manualschedules.spotschedules.5spot.finos.org", READ)
                 | each("changefreezes.spotschedules.5spot.finos.org", READ)
                 | each("tenantcapacitylimits.policy.5spot.finos.org", READ)
                 | each("validatingadmissionpolicies.admissionregistration.k8s.io", READ)
                 | each("validatingadmissionpolicybindings.admissionregistration.k8s.io", READ)
                 | each(f"pools.{group}", READ) | events
                 # governors of a field fivespot does not run (decision record 0029)
                 | each("horizontalpodautoscalers.autoscaling", READ)
                 | each("scaledobjects.keda.sh", READ))
        if where == TENANT:
            found |= each(f"pools.{group}", ("patch",))
        return found | leases if in_install_namespace else found
    if identity == MANUAL:
        found = (each("manualschedules.spotschedules.5spot.finos.org", READ)
                 | each("manualschedules.spotschedules.5spot.finos.org/status", WRITE_STATUS)
                 | events)
        return found | leases if in_install_namespace else found
    if identity == CUSTOM:
        return (each("changefreezes.spotschedules.5spot.finos.org", READ)
                | each("changefreezes.spotschedules.5spot.finos.org/status", WRITE_STATUS))
    found = (each("scheduledmachines.5spot.finos.org", READ)
             | each("scheduledcapacities.5spot.finos.org", READ) | each("namespaces", READ)
             | each("tenantcapacitylimits.policy.5spot.finos.org", READ)
             | each("validatingwebhookconfigurations.admissionregistration.k8s.io",
                    ("get", "patch"), ("fivespot-webhook",))
             | each("horizontalpodautoscalers.autoscaling", ("list",))
             | each("scaledobjects.keda.sh", ("list",)))
    if in_install_namespace:
        found |= each("secrets", ("get", "update"), ("fivespot-webhook-tls",))
    return found


# --- applying and asking the API server --------------------------------------------------------


def isolate(objects: list[dict[str, Any]], suffix: str) -> list[dict[str, Any]]:
    """Cluster-wide RBAC names (and the bindings' references to them) get a per-test suffix (test
    setup only), so tests never share one; so do the Roles and RoleBindings the tenancy layer puts
    in tenant namespaces (`agents`), which other tests and `devcluster install` share. `suffix` is
    the test's install namespace, whose own objects need none."""
    isolated = []
    for obj in objects:
        obj = {**obj, "metadata": dict(obj["metadata"])}
        shared = obj["metadata"].get("namespace", suffix) != suffix
        if obj["kind"] in ("ClusterRole", "ClusterRoleBinding") or (
                shared and obj["kind"] in ("Role", "RoleBinding")):
            obj["metadata"]["name"] = f"{obj['metadata']['name']}-{suffix}"
        if obj["kind"].endswith("Binding") and (obj["roleRef"]["kind"] == "ClusterRole"
                                                or shared):
            obj["roleRef"] = {**obj["roleRef"], "name": f"{obj['roleRef']['name']}-{suffix}"}
        isolated.append(obj)
    return isolated


def kubectl_run(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *args],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result


def kubectl(kubeconfig: Path, *args: str) -> str:
    return kubectl_run(kubeconfig, *args).stdout


def apply_rbac(kubeconfig: Path, repo: Repo, folder: Path) -> None:
    """Server-side apply the compiled RBAC and ServiceAccounts (idempotent on re-apply)."""
    accounts = [a.obj for a in workloads.emit(repo) if a.kind == "ServiceAccount"]
    objects = isolate([a.obj for a in rbac.emit(repo)], repo.namespace) + accounts
    ensure_namespaces(kubeconfig, {o["metadata"]["namespace"] for o in objects
                                   if "namespace" in o["metadata"]} - {repo.namespace})
    manifest = folder / "rbac.yaml"
    manifest.write_text("---\n".join(to_yaml(obj) for obj in objects))
    kubectl(kubeconfig, "apply", "--server-side", "--field-manager=fivespot-test", "-f", str(manifest))
    admin = admin_client(kubeconfig)
    try:
        wait_in_force(admin, objects)  # what `can-i` reports is the authorizer's view of it
    finally:
        admin.close()


_ROW = re.compile(r"^(\S*)\s+\[(.*?)\]\s+\[(.*?)\]\s+\[(.*?)\]\s*$")


def can_i_list(kubeconfig: Path, user: str, namespace: str) -> set[Permission]:
    """`kubectl auth can-i --list` as `user` in `namespace`, one entry per verb."""
    output = kubectl(kubeconfig, "auth", "can-i", "--list", f"--as={user}", "-n", namespace)
    found: set[Permission] = set()
    for line in output.splitlines()[1:]:
        if not line.strip():
            continue
        match = _ROW.match(line)
        assert match, f"unexpected can-i line: {line!r}"
        resource, urls, names, verbs = match.groups()
        for verb in verbs.split():
            found.add((resource or f"url:{urls}", tuple(names.split()), verb))
    return found


def granted(kubeconfig: Path, install: str, identity: str, namespace: str) -> set[Permission]:
    """What `identity` may do in `namespace` beyond what an unbound ServiceAccount may."""
    def user(name: str) -> str:
        return f"system:serviceaccount:{install}:{name}"
    baseline = can_i_list(kubeconfig, user(f"unbound-{uuid.uuid4().hex[:6]}"), namespace)
    return can_i_list(kubeconfig, user(identity), namespace) - baseline


def wait_until(check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout_s}s")
        time.sleep(0.2)


def create_consumer_crd(admin: client.ApiClient, group: str) -> None:
    extensions = client.ApiextensionsV1Api(admin)
    extensions.create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"pools.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"kind": "Pool", "plural": "pools", "singular": "pool"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                         "type": "object", "properties": {"replicas": {"type": "integer"}}}}}}}]},
    })

    def established() -> bool:
        crd = extensions.read_custom_resource_definition(f"pools.{group}")
        return any(c.type == "Established" and c.status == "True"
                   for c in (crd.status.conditions or []))
    wait_until(established)


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture
def tenant(admin: client.ApiClient) -> str:
    name = f"tenant-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(admin).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


@pytest.fixture
def group() -> str:
    return f"g{uuid.uuid4().hex[:8]}.fivespot.test"


@pytest.fixture
def installed(kubeconfig: Path, namespace: str, tenant: str, group: str,
              tmp_path: Path) -> Iterator[Repo]:
    repo = make_repo(namespace, tenant, group)
    apply_rbac(kubeconfig, repo, tmp_path)
    yield repo


# --- tests ----------------------------------------------------------------------------------------


@pytest.fixture
def other(admin: client.ApiClient) -> str:
    """A namespace no TenantPolicy names."""
    name = f"other-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(admin).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


@pytest.mark.parametrize("identity", [CAPACITY, MANUAL, CUSTOM, WEBHOOK])
def test_each_identity_holds_exactly_its_intended_permissions(
        kubeconfig: Path, installed: Repo, tenant: str, other: str, group: str,
        identity: str) -> None:
    install = installed.namespace
    for where, namespace in ((TENANT, tenant), (INSTALL, install), (OTHER, other)):
        assert granted(kubeconfig, install, identity, namespace) == intended(
            identity, group, where), where


def test_reapplying_the_same_rbac_changes_nothing(kubeconfig: Path, installed: Repo,
                                                   tenant: str, group: str, tmp_path: Path) -> None:
    before = granted(kubeconfig, installed.namespace, CAPACITY, tenant)
    apply_rbac(kubeconfig, installed, tmp_path)
    assert granted(kubeconfig, installed.namespace, CAPACITY, tenant) == before


def test_in_cert_manager_mode_the_webhook_holds_no_secret_or_configuration_right(
        kubeconfig: Path, namespace: str, tenant: str, group: str, tmp_path: Path) -> None:
    repo = make_repo(namespace, tenant, group, webhook={"certificate": {
        "mode": "cert-manager", "issuerRef": {"kind": "ClusterIssuer", "name": "ca"}}})
    apply_rbac(kubeconfig, repo, tmp_path)
    expected = {("scheduledmachines.5spot.finos.org", (), v) for v in READ} | {
        ("scheduledcapacities.5spot.finos.org", (), v) for v in READ} | {
        ("namespaces", (), v) for v in READ} | {
        ("tenantcapacitylimits.policy.5spot.finos.org", (), v) for v in READ} | {
        ("horizontalpodautoscalers.autoscaling", (), "list"), ("scaledobjects.keda.sh", (), "list")}
    assert granted(kubeconfig, namespace, WEBHOOK, namespace) == expected
    assert granted(kubeconfig, namespace, WEBHOOK, tenant) == expected


def _status(call: Callable[[], object]) -> int:
    try:
        call()
    except ApiException as error:
        return int(error.status)
    return 200


def test_the_capacity_identity_really_patches_a_consumer_but_cannot_create_delete_or_read_secrets(
        admin: client.ApiClient, installed: Repo, tenant: str, group: str,
        as_service_account: AsServiceAccount) -> None:
    create_consumer_crd(admin, group)
    pool = {"apiVersion": f"{group}/v1", "kind": "Pool", "metadata": {"name": "warm"},
            "spec": {"replicas": 1}}
    client.CustomObjectsApi(admin).create_namespaced_custom_object(group, "v1", tenant, "pools", pool)
    client.CoreV1Api(admin).create_namespaced_secret(
        tenant, client.V1Secret(metadata=client.V1ObjectMeta(name="tenant-secret")))
    identity = as_service_account(installed.namespace, CAPACITY)
    objects, core = client.CustomObjectsApi(identity), client.CoreV1Api(identity)

    patched = objects.patch_namespaced_custom_object(group, "v1", tenant, "pools", "warm",
                                                     {"spec": {"replicas": 7}})
    assert patched["spec"]["replicas"] == 7

    other = {**pool, "metadata": {"name": "forged"}}
    assert _status(lambda: objects.create_namespaced_custom_object(
        group, "v1", tenant, "pools", other)) == 403
    assert _status(lambda: objects.delete_namespaced_custom_object(
        group, "v1", tenant, "pools", "warm")) == 403
    assert _status(lambda: core.read_namespaced_secret("tenant-secret", tenant)) == 403
    assert _status(lambda: core.list_namespaced_secret(installed.namespace)) == 403
    assert _status(lambda: core.patch_namespaced_config_map(
        "kube-root-ca.crt", tenant, {"data": {"x": "y"}})) == 403


def test_the_capacity_identity_cannot_patch_a_consumer_object_outside_the_tenant_namespaces(
        admin: client.ApiClient, kubeconfig: Path, namespace: str, tenant: str, other: str,
        tmp_path: Path, as_service_account: AsServiceAccount) -> None:
    """Deployments gated for one tenant: the identity scales the tenant's, through `/scale` only
    (decision 0050), but not kube-system's (a stolen token cannot scale the cluster's DNS to 0)
    nor another namespace's."""
    repo = make_repo(namespace, tenant, "apps", target=("v1", "Deployment", "deployments"))
    apply_rbac(kubeconfig, repo, tmp_path)
    name = f"dns-{uuid.uuid4().hex[:6]}"
    apps = client.AppsV1Api(admin)
    for ns in (tenant, "kube-system", other):
        apps.create_namespaced_deployment(ns, {
            "metadata": {"name": name},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
    identity = client.AppsV1Api(as_service_account(namespace, CAPACITY))
    try:
        identity.patch_namespaced_deployment_scale(name, tenant, {"spec": {"replicas": 0}})
        assert apps.read_namespaced_deployment(name, tenant).spec.replicas == 0
        assert _status(lambda: identity.patch_namespaced_deployment(
            name, tenant, {"spec": {"replicas": 1}})) == 403, "nothing of the object but /scale"
        for ns in ("kube-system", other):
            assert _status(lambda: identity.patch_namespaced_deployment_scale(
                name, ns, {"spec": {"replicas": 0}})) == 403, ns
            assert _status(lambda: identity.patch_namespaced_deployment(
                name, ns, {"spec": {"replicas": 0}})) == 403, ns
            assert apps.read_namespaced_deployment(name, ns).spec.replicas == 2
            assert identity.read_namespaced_deployment(name, ns).spec.replicas == 2, "reads stay"
    finally:
        apps.delete_namespaced_deployment(name, "kube-system")


def test_the_webhook_identity_fills_its_secret_but_cannot_create_any_secret(
        admin: client.ApiClient, installed: Repo, as_service_account: AsServiceAccount) -> None:
    """Creating a Secret cannot be limited by name: a webhook allowed to would be one
    `kubernetes.io/service-account-token` Secret away from another identity's token (review F7).
    The compiled output holds the Secret, empty; the webhook may only read and update it."""
    install = installed.namespace
    core_admin = client.CoreV1Api(admin)
    core_admin.create_namespaced_secret(install, {
        "metadata": {"name": "fivespot-webhook-tls"}, "type": "kubernetes.io/tls",
        "data": {"tls.crt": "", "tls.key": ""}})
    core = client.CoreV1Api(as_service_account(install, WEBHOOK))
    for name, kind in (("fivespot-webhook-tls-2", "kubernetes.io/tls"),
                       ("minted", "kubernetes.io/service-account-token")):
        assert _status(lambda: core.create_namespaced_secret(install, {
            "metadata": {"name": name, "annotations": {
                "kubernetes.io/service-account.name": CAPACITY}}, "type": kind})) == 403
    assert _status(lambda: core.delete_namespaced_secret("fivespot-webhook-tls", install)) == 403
    secret = core.read_namespaced_secret("fivespot-webhook-tls", install)
    secret.data = {"tls.crt": "Y2VydA==", "tls.key": "a2V5"}
    assert core.replace_namespaced_secret("fivespot-webhook-tls", install, secret).data[
        "tls.crt"] == "Y2VydA=="
    assert _status(lambda: core.list_namespaced_secret(install)) == 403


def _server_dry_run(kubeconfig: Path, objects: list[dict[str, Any]], manifest: Path) -> str:
    """Apply with `--dry-run=server` (validation and admission, nothing stored); return stderr."""
    manifest.write_text("---\n".join(to_yaml(obj) for obj in objects))
    return kubectl_run(kubeconfig, "apply", "--server-side", "--dry-run=server",
                       "--field-manager=fivespot-test", "-f", str(manifest)).stderr


def test_the_compiled_workloads_and_webhook_configuration_pass_validation_and_restricted_pod_security(
        kubeconfig: Path, namespace: str, tenant: str, group: str, tmp_path: Path) -> None:
    repo = make_repo(namespace, tenant, group)
    apply_rbac(kubeconfig, repo, tmp_path)  # the install Namespace, labelled restricted
    objects = [a.obj for a in workloads.emit(repo) + webhook.emit(repo)]
    assert {o["kind"] for o in objects} >= {"Deployment", "PodDisruptionBudget", "Service",
                                            "ValidatingWebhookConfiguration", "Secret"}
    secrets = [o for o in objects if o["kind"] == "Secret"]
    objects = [o for o in objects if o["kind"] != "Secret"]
    assert "Warning" not in _server_dry_run(kubeconfig, objects, tmp_path / "workloads.yaml")
    # The TLS Secret, empty until the webhook fills it, is valid; the API server only warns
    # (once, when it is created) that its blank keys hold no certificate yet.
    warnings = _server_dry_run(kubeconfig, secrets, tmp_path / "secret.yaml").strip().splitlines()
    assert warnings == ["Warning: tls: failed to find any PEM data in certificate input"], warnings

    # The check is live: the same Deployment without its container hardening is warned about.
    [deployment] = [o for o in objects if o["kind"] == "Deployment"
                    and o["metadata"]["name"] == CAPACITY]
    template = deployment["spec"]["template"]
    weakened = {**deployment, "spec": {**deployment["spec"], "template": {**template, "spec": {
        **template["spec"], "securityContext": {},
        "containers": [{k: v for k, v in template["spec"]["containers"][0].items()
                        if k != "securityContext"}]}}}}
    assert "restricted" in _server_dry_run(kubeconfig, [weakened], tmp_path / "weak.yaml")


SOURCES_OF_EVERY_KIND = [
    {"ipBlock": {"cidr": "172.18.0.0/16"}},
    {"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.0.128.0/17"]}},
    {"ipBlock": {"cidr": "fd00::/8"}},
    {"namespaceSelector": {"matchLabels": {"policy-group.network.openshift.io/host-network": ""}}},
    {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
     "podSelector": {"matchExpressions": [{"key": "k8s-app", "operator": "In",
                                           "values": ["konnectivity-agent"]}]}},
    {"podSelector": {"matchExpressions": [{"key": "scraper", "operator": "Exists"}]}},
]


def test_the_webhooks_network_policy_with_every_kind_of_source_passes_the_api_servers_validation(
        kubeconfig: Path, namespace: str, tenant: str, group: str, tmp_path: Path) -> None:
    repo = make_repo(namespace, tenant, group, webhook={"networkPolicy": {
        "allowedSources": SOURCES_OF_EVERY_KIND, "metricsSources": SOURCES_OF_EVERY_KIND[-1:]}})
    apply_rbac(kubeconfig, repo, tmp_path)
    [policy] = [a.obj for a in webhook.emit(repo) if a.obj["kind"] == "NetworkPolicy"]
    assert policy["spec"]["ingress"][0]["from"] == SOURCES_OF_EVERY_KIND
    assert "Warning" not in _server_dry_run(kubeconfig, [policy], tmp_path / "policy.yaml")
    default = make_repo(namespace, tenant, group)
    [closed] = [a.obj for a in webhook.emit(default) if a.obj["kind"] == "NetworkPolicy"]
    assert [r["ports"][0]["port"] for r in closed["spec"]["ingress"]] == [8080]  # serving port shut
    assert "Warning" not in _server_dry_run(kubeconfig, [closed], tmp_path / "closed.yaml")


# --- the docs' table (docs/reference/identities.md), held to the authorizer --------------------

TABLE_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "identities.md"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent-sandbox" / "config"
TABLE_START, TABLE_END = "<!-- identities-table -->", "<!-- /identities-table -->"
Row = tuple[str, str, str, tuple[str, ...], str]
"""(identity, resource, names, verbs, where) as docs/reference/identities.md writes them."""


def readme_rows() -> list[Row]:
    text = TABLE_PAGE.read_text()
    table = text[text.index(TABLE_START) + len(TABLE_START):text.index(TABLE_END)]
    rows: list[Row] = []
    identity = ""
    for line in table.strip().splitlines()[2:]:
        cells = [re.sub(r"\s*\(.*?\)", "", c.replace("`", "")).strip()
                 for c in line.strip().strip("|").split("|")]
        identity = cells[0] or identity
        rows.append((identity, cells[1], cells[2], tuple(v.strip() for v in cells[3].split(",")),
                     cells[4]))
    return rows


def expand(rows: list[Row], repo: Repo) -> dict[str, dict[str, set[Permission]]]:
    """identity -> where -> permissions, with the placeholders filled from `repo`."""
    from fivespot.api.providers import BUILTIN_PROVIDERS
    from fivespot.compiler.emit import crds
    from fivespot.compiler.emit.components import custom_provider_identity

    assert repo.machines is not None
    group = "spotschedules.5spot.finos.org"
    providers = [f"{info.plural}.{group}" for info in crds.provider_infos(repo)]
    builtin = {f"fivespot-provider-{BUILTIN_PROVIDERS[k].command}": f"{BUILTIN_PROVIDERS[k].plural}.{group}"
               for k in repo.builtin_providers}
    custom = {custom_provider_identity(c): f"{c.plural_name}.{group}"
              for c in repo.custom_providers if c.compiled}
    fill = {
        "<provider>.spotschedules.5spot.finos.org": providers,
        "<consumer>": [f"{c.spec.resource}.{c.spec.group}" for c in repo.consumers],
        "<bootstrap>": [f"{k.resource}.{k.group}" for k in repo.machines.spec.bootstrap],
        "<infrastructure>": [f"{k.resource}.{k.group}" for k in repo.machines.spec.infrastructure],
    }
    partitions = [p.name for p in repo.platform.spec.partitions]
    clusters = [c.name for c in repo.machines.spec.clusters]
    found: dict[str, dict[str, set[Permission]]] = {}
    for identity, resource, names, verbs, where in rows:
        owners = {identity: ""}
        if identity == "fivespot-provider-<name>":
            owners = builtin
        elif identity == "fivespot-custom-provider-<plural>":
            owners = custom
        for owner, own_kind in owners.items():
            resources = fill.get(resource, [resource.replace("<its kind>.spotschedules.5spot.finos.org",
                                                             own_kind)])
            name_sets = [()] if not names else [
                (names.replace("<partition>", p).replace("<cluster>", c).replace("<name>", owner
                 .removeprefix("fivespot-provider-")),)
                for p in partitions for c in clusters]
            for res in resources:
                for named in set(name_sets):
                    for verb in verbs:
                        found.setdefault(owner, {}).setdefault(where, set()).add((res, named, verb))
    return found


def test_every_identity_holds_exactly_what_the_readme_table_says(
        kubeconfig: Path, namespace: str, tenant: str, other: str, admin: client.ApiClient,
        tmp_path: Path) -> None:
    """A repo with every component (both patterns, every built-in provider, a compiled and an
    external custom kind, the VAP polyfill, self-managed certificates), its RBAC applied, and
    `kubectl auth can-i --list` as each identity in a tenant namespace, the install namespace,
    a CAPI cluster's namespace and a namespace that is none of these, against the docs' table
    (docs/reference/identities.md)."""
    from fivespot.compiler.pipeline import load

    capi = f"capi-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(admin).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=capi)))
    config = tmp_path / "config"
    config.mkdir()
    for source in EXAMPLE.glob("*.yaml"):
        text = source.read_text().replace("namespace: 5spot-system", f"namespace: {namespace}")
        if source.name == "tenants.yaml":
            text = text.replace("namespaces: [agents]", f"namespaces: [agents, {tenant}]")
        (config / source.name).write_text(text.replace("enforcement: vap", "enforcement: both"))
    (config / "more.yaml").write_text(f"""
apiVersion: config.5spot.finos.org/v1alpha1
kind: MachineProvisioning
metadata: {{name: capi}}
spec:
  clusters: [{{namespace: {capi}, name: desk}}]
  bootstrap: [{{group: bootstrap.cluster.x-k8s.io, version: v1beta2, kind: KubeadmConfig, resource: kubeadmconfigs}}]
  infrastructure: [{{group: infrastructure.cluster.x-k8s.io, version: v1beta2, kind: DevMachine, resource: devmachines}}]
---
apiVersion: config.5spot.finos.org/v1alpha1
kind: ScheduleProvider
metadata: {{name: ours}}
spec:
  custom:
    - {{kind: ChangeFreeze, specSchema: {{type: object}}}}
    - {{kind: DeskToggle, crd: external}}
""")
    repo = load(config)
    apply_rbac(kubeconfig, repo, tmp_path)
    table = expand(readme_rows(), repo)
    accounts = {a.name for a in workloads.emit(repo) if a.kind == "ServiceAccount"}
    assert set(table) == accounts, "every identity has rows, and every row an identity"
    for identity, places in sorted(table.items()):
        everywhere = places.get("everywhere", set())
        for where, ns in (("tenant namespaces", tenant), ("install namespace", namespace),
                          ("cluster namespaces", capi), ("", other)):
            expected = everywhere | places.get(where, set())
            assert granted(kubeconfig, namespace, identity, ns) == expected, (identity, where)
