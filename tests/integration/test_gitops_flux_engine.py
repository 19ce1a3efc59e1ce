"""Real Flux (source-controller and kustomize-controller v1.9.6, built from the Go module proxy)
syncs the compiled example from a git server on loopback, on a control plane where the compiled
Deployments really run (the built image on tests/integration/kubelet.py's node): the real
webhook injects its own caBundle, the real controllers and providers report status.

What the docs promise for Flux (docs/operations/gitops.md), held to the engine itself:
- `kubectl apply -k OUT/flux` once, and the entry Kustomization brings every layer to Ready, each
  only after the one it depends on (`--requeue-dependency=5s`, instead of the default 30 s, to
  keep the chain short);
- the emitted `healthCheckExprs` hold the webhook layer while a webhook has no caBundle, and let
  it go once the webhook has injected one;
- a tenant Kustomization with `wait: true` fails its health check on a Stalled
  ScheduledCapacity (kstatus Failed), and is Ready on settled ones;
- prune protection: a provider dropped from the config takes its workloads with it but not its
  CRD, and deleting the CRD and RBAC Kustomizations leaves every CRD and namespace in place.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from fivespot.devcluster.gitops_engines import Flux
from fivespot.devcluster.gitserver import GitServer
from fivespot.devcluster.kubectl import kubectl
from fivespot.runtime import kube
from tests.integration.gitops_world import (
    EXAMPLE,
    GIT_REPOSITORIES,
    INSTALL_NS,
    KUSTOMIZATIONS,
    SCAP,
    TENANT,
    Node,
    WatchedRepo,
    condition,
    copy_config,
    custom_path,
    engine_world,
    eventually,
    get_or_none,
    request_reconcile,
    start_flux,
)

pytestmark = [pytest.mark.timeout(2400), pytest.mark.engines]

LAYERS: Final = ("crds", "rbac", "admission", "workloads", "webhook", "schedules")
WEBHOOK_CONFIGURATION: Final = "fivespot-webhook"
VMP: Final = ("pools.agents.example.com", "v1alpha1", "virtualmachinepools")
SYNC_TIMEOUT_S: Final = 600.0


@dataclass
class FluxWorld:
    node: Node
    flux: Flux
    repo: WatchedRepo
    server: GitServer
    config: Path
    work: Path

    @property
    def api(self) -> Any:
        return self.node.api

    def kustomization(self, name: str) -> dict[str, Any] | None:
        return get_or_none(self.api, custom_path(KUSTOMIZATIONS, "flux-system", name))

    def explain(self) -> str:
        lines = []
        for name in ("fivespot", *(f"fivespot-{layer}" for layer in LAYERS)):
            found = self.kustomization(name)
            lines.append(f"{name}: {condition(found, 'Ready')}")
        lines.append(self.flux.processes.tail("kustomize-controller", 15))
        lines += self.node.kubelet.errors[-5:]
        return "\n".join(lines)

    def ready_at(self, name: str, revision: str) -> dict[str, Any] | None:
        found = self.kustomization(name)
        ready = condition(found, "Ready")
        if ready.get("status") == "True" and found is not None \
                and found["status"].get("lastAppliedRevision") == f"main@sha1:{revision}":
            return found
        return None

    def sync(self, revision: str, name: str = "fivespot") -> dict[str, Any]:
        """Trigger the source (Flux's requestedAt) and wait until `name` is Ready at `revision`."""
        request_reconcile(self.api, GIT_REPOSITORIES, "cluster-config")
        self.flux.check()
        return eventually(lambda: self.ready_at(name, revision), SYNC_TIMEOUT_S,
                          f"Kustomization {name} Ready at {revision}", self.explain, every_s=1.0)


@pytest.fixture(scope="module")
def world(built_image: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[FluxWorld]:
    work = tmp_path_factory.mktemp("flux-engine")
    with engine_world(built_image, work, start_flux) as (node, server, flux):
        repo = WatchedRepo.create(server, "cluster-config", work)
        config = copy_config(EXAMPLE / "config", work / "config", gitops={
            "argocd": {"repoURL": repo.url},
            "flux": {"url": repo.url, "ref": "main", "sourceRef": {"name": "cluster-config"},
                     "path": "./clusters/prod/fivespot"}})
        yield FluxWorld(node, flux, repo, server, config, work)


def _time(stamp: str) -> float:
    return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


def _ca_bundle_injected_at(api: Any) -> float | None:
    configuration = get_or_none(api, "/apis/admissionregistration.k8s.io/v1/"
                                     f"validatingwebhookconfigurations/{WEBHOOK_CONFIGURATION}")
    if configuration is None or not all(h["clientConfig"].get("caBundle")
                                        for h in configuration["webhooks"]):
        return None
    times = [_time(entry["time"]) for entry in configuration["metadata"].get("managedFields") or []
             if "caBundle" in json.dumps(entry.get("fieldsV1") or {})]
    return max(times) if times else None


def test_the_entry_kustomization_brings_every_layer_ready_in_depends_on_order(world: FluxWorld) -> None:
    revision = world.repo.publish(world.config, "fivespot: the example, compiled")
    # The docs' bootstrap, from the output folder the engine will also read.
    kubectl(world.node.kubeconfig, "apply", "-k", str(world.repo.out / "flux"))
    started = time.monotonic()
    world.sync(revision)
    print(f"Flux: commit to every layer Ready: {time.monotonic() - started:.0f}s")

    layers = {layer: world.ready_at(f"fivespot-{layer}", revision) for layer in LAYERS}
    assert all(layers.values()), world.explain()
    previous_ready: float | None = None
    for layer in LAYERS:
        kustomization = layers[layer]
        assert kustomization is not None
        ready_at = _time(condition(kustomization, "Ready")["lastTransitionTime"])
        created = [_created(world.node.kubeconfig, entry["id"]) for entry in
                   kustomization["status"]["inventory"]["entries"]]
        if previous_ready is not None:
            assert min(created) >= previous_ready, (
                f"{layer}: an object was created before the layer it depends on was Ready")
        previous_ready = ready_at
    injected = _ca_bundle_injected_at(world.api)
    assert injected is not None
    webhook_ready = _time(condition(layers["webhook"], "Ready")["lastTransitionTime"])
    assert webhook_ready >= injected, "the webhook layer was Ready before its caBundle was injected"


def _created(kubeconfig: Path, inventory_id: str) -> float:
    """creationTimestamp of a Flux inventory entry (`<namespace>_<name>_<group>_<kind>`)."""
    namespace, name, group, kind = inventory_id.split("_")
    resource = f"{kind}.{group}" if group else kind
    scope = ["-n", namespace] if namespace else []
    stamp = kubectl(kubeconfig, "get", resource, name, *scope, "-o",
                    "jsonpath={.metadata.creationTimestamp}")
    return _time(stamp.strip())


def test_the_webhook_layer_is_held_while_a_webhook_has_no_ca_bundle(world: FluxWorld) -> None:
    """The caBundle taken away (a rotation gone wrong, a restore from backup): the next
    reconcile of `fivespot-webhook` is not Ready until the real webhook has injected it again
    (it checks its configuration every 60 s)."""
    path = f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{WEBHOOK_CONFIGURATION}"
    held: dict[str, Any] | None = None
    for _attempt in range(3):  # the webhook may re-inject before Flux looks: take it away again
        configuration = kube.request(world.api, "GET", path)
        removal = [{"op": "remove", "path": f"/webhooks/{i}/clientConfig/caBundle"}
                   for i, hook in enumerate(configuration["webhooks"])
                   if hook["clientConfig"].get("caBundle")]
        kube.request(world.api, "PATCH", path, body=removal, content_type="application/json-patch+json")
        token = request_reconcile(world.api, KUSTOMIZATIONS, "fivespot-webhook")

        def seen_held() -> dict[str, Any] | None:
            found = world.kustomization("fivespot-webhook")
            checking = condition(found, "Healthy")
            if _ca_bundle_injected_at(world.api) is not None:
                return {"reinjected": True}
            if condition(found, "Ready").get("status") != "True" and \
                    str(checking.get("message", "")).startswith("Running health checks"):
                return {"held": checking}
            return None

        outcome = eventually(seen_held, 120, "fivespot-webhook to start its health checks",
                             world.explain, every_s=0.5)
        if "held" in outcome:
            held = outcome["held"]
            break
    assert held is not None, "the webhook re-injected its caBundle before Flux looked, three times"

    def ready_again() -> dict[str, Any] | None:
        found = world.kustomization("fivespot-webhook")
        done = found is not None and (found.get("status") or {}).get("lastHandledReconcileAt") == token
        return found if done and condition(found, "Ready").get("status") == "True" else None

    found = eventually(ready_again, 180, "the webhook to re-inject its caBundle and the layer to be Ready",
                       world.explain)
    injected = _ca_bundle_injected_at(world.api)
    assert injected is not None
    assert _time(condition(found, "Ready")["lastTransitionTime"]) >= injected


def _tenant_objects(enabled: bool) -> str:
    documents = [
        {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "ManualSchedule",
         "metadata": {"name": "desk-window", "namespace": TENANT}, "spec": {"enabled": enabled}},
        {"apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
         "metadata": {"name": "desk", "namespace": TENANT},
         "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                               "kind": "ManualSchedule", "name": "desk-window"},
                  "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                                "kind": "VirtualMachinePool", "name": "desk-pool"},
                  "capacity": {"path": "spec.warmReplicas", "activeValue": 3},
                  "handback": {"drainedPath": "status.inUse", "timeout": "2s"}}},
    ]
    return yaml.safe_dump_all(documents, sort_keys=False)


def test_a_tenant_kustomization_fails_its_health_check_on_a_stalled_scheduled_capacity(
        world: FluxWorld) -> None:
    api = world.api
    kube.request(api, "POST", custom_path(VMP, TENANT), body={
        "apiVersion": "pools.agents.example.com/v1alpha1", "kind": "VirtualMachinePool",
        "metadata": {"name": "desk-pool"}, "spec": {"warmReplicas": 0}})
    tenant = WatchedRepo.create(world.server, "team-agents", world.work)
    (tenant.tree / "agents").mkdir()
    (tenant.tree / "agents" / "desk.yaml").write_text(_tenant_objects(enabled=True))
    tenant.commit("desk: capacity while the window is open")
    first = tenant.push()
    flux_objects = [
        {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
         "metadata": {"name": "team-agents", "namespace": "flux-system"},
         "spec": {"interval": "10m", "url": tenant.url, "ref": {"branch": "main"}}},
        {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
         "metadata": {"name": "team-agents", "namespace": "flux-system"},
         "spec": {"interval": "10m", "path": "./agents", "prune": True, "wait": True,
                  "timeout": "90s", "sourceRef": {"kind": "GitRepository", "name": "team-agents"}}},
    ]
    kubectl(world.node.kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(flux_objects))

    def tenant_ready(revision: str) -> dict[str, Any] | None:
        found = world.kustomization("team-agents")
        if condition(found, "Ready").get("status") == "True" and found is not None \
                and found["status"].get("lastAppliedRevision") == f"main@sha1:{revision}":
            return found
        return None

    eventually(lambda: tenant_ready(first), 240, "the tenant Kustomization Ready",
               lambda: str(condition(world.kustomization("team-agents"), "Ready")))

    # Ready does not wait for Active: to kstatus a ScheduledCapacity is current before its first
    # status write, and while Inactive (its schedule not yet read as active) too.
    def phase() -> object:
        found = get_or_none(api, custom_path(SCAP, TENANT, "desk"))
        return (found or {}).get("status", {}).get("phase")

    eventually(lambda: phase() == "Active", 120, "the ScheduledCapacity Active", lambda: str(phase()))
    # The consumer's controller reports a sandbox in use: the handback cannot drain in time.
    kube.merge_patch(api, custom_path(VMP, TENANT, "desk-pool") + "/status", {"status": {"inUse": 1}})

    (tenant.tree / "agents" / "desk.yaml").write_text(_tenant_objects(enabled=False))
    tenant.commit("desk: close the window")
    second = tenant.push()
    request_reconcile(api, GIT_REPOSITORIES, "team-agents")
    # Flux judges health right after it applies. Either the ScheduledCapacity stalls while Flux
    # still waits (the ManualSchedule's new generation not yet observed): the health check fails
    # at once; or Flux finds everything settled first (the flip not yet reached the capacity):
    # then the next reconcile, once the handback has timed out, fails it.
    requested: list[str] = []

    def failed() -> dict[str, Any] | None:
        found = world.kustomization("team-agents")
        ready = condition(found, "Ready")
        if found is None:
            return None
        status = found["status"]
        if ready.get("status") == "False" and ready.get("reason") == "HealthCheckFailed" \
                and status.get("lastAttemptedRevision") == f"main@sha1:{second}" \
                and (not requested or status.get("lastHandledReconcileAt") == requested[0]):
            return ready
        stalled = condition(get_or_none(api, custom_path(SCAP, TENANT, "desk")), "Stalled")
        if not requested and tenant_ready(second) and stalled.get("status") == "True":
            requested.append(request_reconcile(api, KUSTOMIZATIONS, "team-agents"))
        return None

    ready = eventually(failed, 300, "the tenant Kustomization's health check to fail",
                       lambda: str(condition(world.kustomization("team-agents"), "Ready")))
    assert f"ScheduledCapacity/{TENANT}/desk status: 'Failed'" in ready["message"], ready
    scap = kube.request(api, "GET", custom_path(SCAP, TENANT, "desk"))
    assert scap["status"]["phase"] == "HandbackTimedOut"


def _exists(api: Any, path: str) -> bool:
    return get_or_none(api, path) is not None


CRDS: Final = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def test_prune_protection_keeps_crds_and_namespaces_and_takes_a_dropped_providers_workloads(
        world: FluxWorld) -> None:
    api = world.api
    providers = world.config / "providers.yaml"
    document = yaml.safe_load(providers.read_text())
    document["spec"]["builtin"].remove("TimeBasedSpotSchedule")
    providers.write_text(yaml.safe_dump(document, sort_keys=False))
    revision = world.repo.publish(world.config, "fivespot: drop TimeBasedSpotSchedule")
    world.sync(revision)

    deployments = f"/apis/apps/v1/namespaces/{INSTALL_NS}/deployments"
    eventually(lambda: not _exists(api, f"{deployments}/fivespot-provider-time-based"), 120,
               "the dropped provider's Deployment pruned")
    for path in (f"/api/v1/namespaces/{INSTALL_NS}/serviceaccounts/fivespot-provider-time-based",
                 "/apis/rbac.authorization.k8s.io/v1/clusterroles/fivespot-provider-time-based"):
        assert not _exists(api, path), path
    assert _exists(api, f"{CRDS}/timebasedspotschedules.spotschedules.5spot.finos.org"), \
        "the dropped provider's CRD was pruned (it would take every TimeBasedSpotSchedule with it)"

    crds = sorted(item["metadata"]["name"] for item in kube.request(api, "GET", CRDS)["items"]
                  if item["metadata"]["name"].endswith("5spot.finos.org"))
    for name in ("fivespot-crds", "fivespot-rbac"):
        kube.request(api, "DELETE", custom_path(KUSTOMIZATIONS, "flux-system", name))
    eventually(lambda: all(world.kustomization(n) is None for n in ("fivespot-crds", "fivespot-rbac")),
               120, "both Kustomizations deleted (and their prunable objects with them)")
    assert not _exists(api, "/apis/rbac.authorization.k8s.io/v1/clusterroles/fivespot-webhook"), \
        "the RBAC layer's objects are pruned with its Kustomization"
    left = sorted(item["metadata"]["name"] for item in kube.request(api, "GET", CRDS)["items"]
                  if item["metadata"]["name"].endswith("5spot.finos.org"))
    assert left == crds
    for namespace in (INSTALL_NS, TENANT):
        found = get_or_none(api, f"/api/v1/namespaces/{namespace}")
        assert found is not None and "deletionTimestamp" not in found["metadata"], namespace

    request_reconcile(api, KUSTOMIZATIONS, "fivespot")
    eventually(lambda: world.ready_at("fivespot-rbac", revision), SYNC_TIMEOUT_S,
               "the entry Kustomization to recreate the deleted layers", world.explain)
    assert _exists(api, "/apis/rbac.authorization.k8s.io/v1/clusterroles/fivespot-webhook")
