"""Real Argo CD (application-controller and repo-server v3.6.2, built from the Go module proxy)
syncs the compiled example from a git server on loopback, on a control plane where the compiled
Deployments really run (the built image on tests/integration/kubelet.py's node): the real
webhook injects its own caBundle, the real controllers and providers report status.

What the docs promise for Argo CD (docs/operations/gitops.md, health.md), held to the engine itself, in one cluster, in order:
- the docs' steps (the health keys under fivespot's field manager, the AppProject, the
  Application) and the compiled Application syncs the example to Synced / Healthy, wave after
  wave, in the two-step rollout (failurePolicy Ignore, then Fail) with a ScheduledCapacity create
  tried every 100 ms from the first moment one could be made, none refused; the admission wave's
  TenantCapacityLimit params have no health (the old health check held the sync at wave 2);
- every resource's health as Argo CD computes it (`--persist-resource-health`:
  `Application.status.resources[].health`) is the docs' table's, for every phase the capacity
  controller can be driven into (a tenant's own Application);
- no drift after the sync: a hard refresh finds every resource Synced (the injected caBundle,
  server-side apply and diff);
- a CRD leaving the output prunes its provider's objects but neither the CRD nor its tenants'
  objects;
- deleting the Application removes every fivespot object but the CRDs and namespaces, and
  leaves the tenants' objects alone.
"""

from __future__ import annotations

import functools
import json
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from fivespot.devcluster.gitops_engines import ArgoCD
from fivespot.devcluster.gitserver import GitServer
from fivespot.devcluster.kubectl import kubectl
from fivespot.runtime import kube
from tests.integration.gitops_world import (
    APPLICATIONS,
    EXAMPLE,
    FetchRetry,
    INSTALL_NS,
    ROOT,
    SCAP,
    TENANT,
    Node,
    WatchedRepo,
    Writer,
    application,
    apply_argocd_objects,
    copy_config,
    custom_path,
    describe_application,
    edit_platform,
    engine_world,
    eventually,
    get_or_none,
    refresh,
    start_argocd,
    synced_at,
)

pytestmark = [pytest.mark.timeout(2400), pytest.mark.engines]

SYNC_TIMEOUT_S: Final = 600.0
VMP: Final = ("pools.agents.example.com", "v1alpha1", "virtualmachinepools")
MANUAL: Final = ("spotschedules.5spot.finos.org", "v1alpha1", "manualschedules")
TIME_BASED: Final = ("spotschedules.5spot.finos.org", "v1alpha1", "timebasedspotschedules")
CRDS: Final = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CONFIGURATION: Final = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/fivespot-webhook"
PHASES: Final = ("Active", "Inactive", "Pending", "Disabled", "Terminated", "HandingBack",
                 "HandbackTimedOut")
"""The ScheduledCapacity phases the controller is driven into here (docs/operations/health.md, "Health in Argo CD
and Flux"); Error needs a spec admission lets through and the controller refuses, which the
webhook and policies of this example never let through."""


@dataclass
class ArgoWorld:
    node: Node
    argocd: ArgoCD
    repo: WatchedRepo
    server: GitServer
    config: Path
    work: Path
    revisions: list[str]

    @property
    def api(self) -> Any:
        return self.node.api

    def sync(self, revision: str, name: str = "fivespot", timeout_s: float = SYNC_TIMEOUT_S
             ) -> dict[str, Any]:
        """Argo CD's refresh annotation, then wait until `name` is Synced / Healthy at `revision`."""
        refresh(self.api, name)
        return self.wait_synced(revision, name, timeout_s)

    def wait_synced(self, revision: str, name: str = "fivespot",
                    timeout_s: float = SYNC_TIMEOUT_S) -> dict[str, Any]:
        retry = FetchRetry(self.api, name, self.repo.url)

        def done() -> dict[str, Any] | None:
            self.argocd.check()
            app = application(self.api, name)
            retry(app)
            return app if synced_at(app, revision) else None

        return eventually(done, timeout_s, f"Application {name} Synced / Healthy at {revision}",
                          lambda: describe_application(application(self.api, name))
                          + "\n" + self.argocd.processes.tail("argocd-application-controller", 10)
                          + "\ngit server:\n" + self.server.log_tail(), every_s=1.0)


@pytest.fixture(scope="module")
def world(built_image: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArgoWorld]:
    work = tmp_path_factory.mktemp("argocd-engine")
    with engine_world(built_image, work, start_argocd) as (node, server, argocd):
        repo = WatchedRepo.create(server, "cluster-config", work)
        config = copy_config(EXAMPLE / "config", work / "config",
                             gitops={"argocd": {"repoURL": repo.url}})
        yield ArgoWorld(node, argocd, repo, server, config, work, [])


def _objects_by_wave(kubeconfig: Path, app: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    kinds = sorted({f"{r['kind']}.{r['group']}" if r.get("group") else r["kind"]
                    for r in app["status"]["resources"]})
    listed = json.loads(kubectl(kubeconfig, "get", ",".join(kinds), "-A", "-o", "json"))["items"]
    wanted = {(r.get("group", ""), r["kind"], r.get("namespace", ""), r["name"])
              for r in app["status"]["resources"]}
    waves: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for obj in listed:
        meta = obj["metadata"]
        key = (obj["apiVersion"].rpartition("/")[0], obj["kind"], meta.get("namespace", ""), meta["name"])
        if key in wanted:
            waves[int(meta["annotations"]["argocd.argoproj.io/sync-wave"])].append(obj)
    return dict(waves)


def test_the_application_syncs_the_example_wave_by_wave_refusing_no_write_in_the_two_step_rollout(
        world: ArgoWorld) -> None:
    api = world.api
    edit_platform(world.config, webhook={**yaml.safe_load(
        (world.config / "platform.yaml").read_text())["spec"]["webhook"], "failurePolicy": "Ignore"})
    first = world.repo.publish(world.config, "fivespot: the example, failurePolicy Ignore")
    writer = Writer(api).start()
    try:
        started = time.monotonic()
        apply_argocd_objects(world.node.kubeconfig, world.repo.out)
        app = world.wait_synced(first)
        print(f"Argo CD: Application created to Synced/Healthy: {time.monotonic() - started:.0f}s")
        limits = [r for r in app["status"]["resources"] if r["kind"] == "TenantCapacityLimit"]
        assert len(limits) == 2 and all("health" not in r for r in limits), limits
        assert [r for r in app["status"]["resources"] if r["kind"] == "CapitalMarketsSchedule"][0][
            "health"]["status"] == "Healthy"

        edit_platform(world.config, webhook={**yaml.safe_load(
            (world.config / "platform.yaml").read_text())["spec"]["webhook"], "failurePolicy": "Fail"})
        second = world.repo.publish(world.config, "fivespot: failurePolicy Fail")
        started = time.monotonic()
        app = world.sync(second)
        print(f"Argo CD: the Fail commit to Synced/Healthy: {time.monotonic() - started:.0f}s")
        world.revisions += [first, second]
        time.sleep(2)
    finally:
        writer.stop()
    assert writer.refused == [], writer.refused[:5]
    assert writer.attempts > 100, f"only {writer.attempts} writes reached admission"
    configuration = kube.request(api, "GET", CONFIGURATION)
    assert {h["failurePolicy"] for h in configuration["webhooks"]} == {"Fail"}
    assert all(h["clientConfig"].get("caBundle") for h in configuration["webhooks"])

    waves = _objects_by_wave(world.node.kubeconfig, app)
    # Argo CD creates the Application's destination namespace (the install namespace) before any
    # wave, so that its dry run of the namespaced objects can pass (gitops-engine's namespace
    # creation task); every other object comes in its wave.
    destination = app["spec"]["destination"]["namespace"]
    waves[1] = [o for o in waves[1] if (o["kind"], o["metadata"]["name"]) != ("Namespace", destination)]
    assert sorted(waves) == [0, 1, 2, 3, 4, 5], sorted(waves)
    previous_latest, previous = "", ""
    for wave in sorted(waves):
        created = sorted((o["metadata"]["creationTimestamp"], o["kind"], o["metadata"]["name"])
                         for o in waves[wave])
        assert created[0][0] >= previous_latest, (
            f"wave {wave} began ({created[0]}) before wave {wave - 1} ended ({previous})")
        previous_latest, previous = created[-1][0], str(created[-1])


def test_no_resource_drifts_out_of_sync_after_a_hard_refresh(world: ArgoWorld) -> None:
    """The webhook's injected caBundle (ignoreDifferences) and fields the API server defaults
    (server-side diff) do not show as drift."""
    assert world.revisions, "the sync test runs first"
    refresh(world.api, kind="hard")
    time.sleep(15)
    app = world.wait_synced(world.revisions[-1], timeout_s=120)
    drifted = [r for r in app["status"]["resources"] if r.get("status") != "Synced"]
    assert drifted == []
    assert app["status"]["sync"]["status"] == "Synced"


def _tenant_objects(pools: dict[str, str]) -> list[dict[str, Any]]:
    """A tenant's ManualSchedules and ScheduledCapacities, one pair per phase."""
    enabled = {"Active": True, "Inactive": False, "Pending": True, "Disabled": True,
               "Terminated": True, "HandingBack": True, "HandbackTimedOut": True}
    documents: list[dict[str, Any]] = []
    for phase in PHASES:
        name = phase.lower()
        documents.append({"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                          "kind": "ManualSchedule", "metadata": {"name": name, "namespace": TENANT},
                          "spec": {"enabled": enabled[phase]}})
        spec: dict[str, Any] = {
            "schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                         "kind": "ManualSchedule", "name": name},
            "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                          "kind": "VirtualMachinePool", "name": pools.get(phase, "no-such-pool")},
            "capacity": {"path": "spec.warmReplicas", "activeValue": 2},
            "handback": {"drainedPath": "status.inUse",
                         "timeout": "2s" if phase == "HandbackTimedOut" else "10m"}}
        if phase == "Disabled":
            spec["enabled"] = False
        if phase == "Terminated":
            spec["killSwitch"] = True
        documents.append({"apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
                          "metadata": {"name": name, "namespace": TENANT}, "spec": spec})
    documents.append({"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                      "kind": "TimeBasedSpotSchedule", "metadata": {"name": "nights", "namespace": TENANT},
                      "spec": {"daysOfWeek": ["mon-sun"], "hoursOfDay": ["22-23"], "timezone": "UTC"}})
    return documents


def _readme_verdicts() -> dict[str, str]:
    """The Argo CD column of the docs' ScheduledCapacity table (docs/operations/health.md), for
    each phase driven here: the first row whose first cell names the phase."""
    text = (ROOT / "docs" / "operations" / "health.md").read_text()
    table = text[text.index("| ScheduledCapacity | Ready (reason) | kstatus | Argo CD |"):]
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    rows = rows[:next(i for i, row in enumerate(rows) if row.startswith("| ScheduledMachine"))] \
        if any(row.startswith("| ScheduledMachine") for row in rows) else rows
    found = {}
    for phase in PHASES:
        row = next(r for r in rows if r.split("|")[1].strip().startswith(phase)
                   or f"/ {phase}" in r.split("|")[1])
        found[phase] = row.rstrip().rstrip("|").split("|")[-1].strip()
    return found


def test_argo_cd_computes_every_resources_health_as_the_readme_table_says(world: ArgoWorld) -> None:
    api = world.api
    pools = {phase: f"pool-{phase.lower()}" for phase in PHASES if phase != "Pending"}
    for phase, pool in pools.items():
        kube.request(api, "POST", custom_path(VMP, TENANT), body={
            "apiVersion": "pools.agents.example.com/v1alpha1", "kind": "VirtualMachinePool",
            "metadata": {"name": pool}, "spec": {"warmReplicas": 0}})
        if phase in ("HandingBack", "HandbackTimedOut"):  # a sandbox in use: the handback waits
            kube.merge_patch(api, custom_path(VMP, TENANT, pool) + "/status", {"status": {"inUse": 1}})
    tenant = WatchedRepo.create(world.server, "team-agents", world.work)
    (tenant.tree / "agents").mkdir()
    (tenant.tree / "agents" / "capacity.yaml").write_text(
        yaml.safe_dump_all(_tenant_objects(pools), sort_keys=False))
    tenant.commit("agents: capacity in every phase")
    revision = tenant.push()
    kubectl(world.node.kubeconfig, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "team-agents", "namespace": "argocd"},
        "spec": {"project": "default",
                 "source": {"repoURL": tenant.url, "targetRevision": "HEAD", "path": "agents"},
                 "destination": {"server": "https://kubernetes.default.svc", "namespace": TENANT},
                 # No self-heal: the test flips two schedules itself, as a person would.
                 "syncPolicy": {"automated": {"prune": False, "selfHeal": False},
                                "syncOptions": ["ServerSideApply=true"]}}}))

    def phase_of(name: str) -> Any:
        found = get_or_none(api, custom_path(SCAP, TENANT, name))
        return ((found or {}).get("status") or {}).get("phase")

    for name in ("handingback", "handbacktimedout"):
        eventually(functools.partial(lambda n: phase_of(n) == "Active", name), 240,
                   f"{name} Active first")
        kube.merge_patch(api, custom_path(MANUAL, TENANT, name), {"spec": {"enabled": False}})
    eventually(lambda: all(phase_of(p.lower()) == p for p in PHASES), 240,
               "every ScheduledCapacity in its phase", lambda: str({p: phase_of(p.lower()) for p in PHASES}))

    expected = _readme_verdicts()
    assert expected == {"Active": "Healthy", "Inactive": "Healthy", "Pending": "Progressing",
                        "Disabled": "Healthy", "Terminated": "Healthy", "HandingBack": "Progressing",
                        "HandbackTimedOut": "Degraded"}

    def healths() -> dict[str, Any]:
        app = application(api, "team-agents")
        return {r["name"]: (r.get("health") or {}).get("status")
                for r in (app.get("status") or {}).get("resources") or []
                if r["kind"] == "ScheduledCapacity"}

    def as_the_readme_says() -> bool:
        refresh(api, "team-agents")
        return healths() == {p.lower(): expected[p] for p in PHASES}

    eventually(as_the_readme_says, 120, "Argo CD's health of each ScheduledCapacity",
               lambda: f"Argo CD: {healths()}\ndocs: {expected}", every_s=3.0)
    app = application(api, "team-agents")
    providers = {r["name"]: r.get("health") for r in app["status"]["resources"]
                 if r["kind"] in ("ManualSchedule", "TimeBasedSpotSchedule")}
    assert all((h or {}).get("status") == "Healthy" for h in providers.values()), providers
    assert app["status"]["health"]["status"] == "Degraded"  # the worst of its resources
    assert app["status"]["sync"]["revision"] == revision


def test_a_crd_leaving_the_output_prunes_its_providers_objects_but_not_the_crd_or_tenants_objects(
        world: ArgoWorld) -> None:
    api = world.api
    assert get_or_none(api, custom_path(TIME_BASED, TENANT, "nights")) is not None
    providers = world.config / "providers.yaml"
    document = yaml.safe_load(providers.read_text())
    document["spec"]["builtin"].remove("TimeBasedSpotSchedule")
    providers.write_text(yaml.safe_dump(document, sort_keys=False))
    revision = world.repo.publish(world.config, "fivespot: drop TimeBasedSpotSchedule")
    world.sync(revision)
    world.revisions.append(revision)
    for path in (f"/apis/apps/v1/namespaces/{INSTALL_NS}/deployments/fivespot-provider-time-based",
                 f"/api/v1/namespaces/{INSTALL_NS}/serviceaccounts/fivespot-provider-time-based",
                 "/apis/rbac.authorization.k8s.io/v1/clusterroles/fivespot-provider-time-based"):
        eventually(functools.partial(lambda p: get_or_none(api, p) is None, path), 120,
                   f"{path} pruned")
    crd = get_or_none(api, f"{CRDS}/timebasedspotschedules.spotschedules.5spot.finos.org")
    assert crd is not None and "deletionTimestamp" not in crd["metadata"]
    assert get_or_none(api, custom_path(TIME_BASED, TENANT, "nights")) is not None


def test_deleting_the_application_removes_everything_but_crds_namespaces_and_tenants_objects(
        world: ArgoWorld) -> None:
    api = world.api
    crds = sorted(item["metadata"]["name"] for item in kube.request(api, "GET", CRDS)["items"]
                  if item["metadata"]["name"].endswith("5spot.finos.org"))
    assert len(crds) == 7
    tenants_objects = [custom_path(SCAP, TENANT, p.lower()) for p in PHASES] + [
        custom_path(TIME_BASED, TENANT, "nights")]
    kube.request(api, "DELETE", custom_path(APPLICATIONS, "argocd", "fivespot"))
    eventually(lambda: get_or_none(api, custom_path(APPLICATIONS, "argocd", "fivespot")) is None,
               300, "the Application and, through its finalizer, its objects deleted")
    for path in (f"/apis/apps/v1/namespaces/{INSTALL_NS}/deployments",
                 f"/api/v1/namespaces/{INSTALL_NS}/services",
                 "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
                 "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"):
        left = [i["metadata"]["name"] for i in kube.request(api, "GET", path)["items"]
                if i["metadata"].get("labels", {}).get("app.kubernetes.io/part-of") == "fivespot"]
        assert left == [], f"{path}: {left}"
    roles = [i["metadata"]["name"] for i in kube.request(
        api, "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles")["items"]
        if i["metadata"]["name"].startswith("fivespot-")]
    assert roles == []
    assert sorted(item["metadata"]["name"] for item in kube.request(api, "GET", CRDS)["items"]
                  if item["metadata"]["name"].endswith("5spot.finos.org")) == crds
    for namespace in (INSTALL_NS, TENANT):
        found = get_or_none(api, f"/api/v1/namespaces/{namespace}")
        assert found is not None and "deletionTimestamp" not in found["metadata"], namespace
    for path in tenants_objects:
        assert get_or_none(api, path) is not None, path
