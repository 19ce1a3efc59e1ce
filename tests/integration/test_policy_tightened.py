"""A TenantPolicy tightened under objects already stored, against the real API server and the real
capacity controller.

The agent-sandbox example is installed with tenant `agents` allowed up to 10; ScheduledCapacities
are created and go Active; then the platform team lowers the limit to 5 and the output is
installed again (as a GitOps sync would). Then:
- admission ratchets: disabling, the kill switch, a lower value and a label edit of a stored
  object over the new limit are admitted; raising its value or changing its target is denied
  with the policy's own message — and `fivespot check --old` gives the same verdicts and whole
  Status as the server;
- the controller: the target never gets a value above the new limit once the policy is in the
  cluster (a watch on the targets from that revision, and the controller's own audit log); the
  object is handed back to 0 and says why (Stalled=True/OutOfPolicy naming the TenantPolicy and
  the limit); lowered to comply, it is Active again at the new value;
- a namespace whose TenantPolicy is removed (`lab`): its objects are handed back to 0 by the
  controller still running the bundle from before, within the same bound, and a schedule that
  closes and opens again does not give the capacity back (which namespaces are tenants is read
  from the cluster's policies, as a limit is).
"""

from __future__ import annotations

import copy
import json
import math
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from fivespot.controllers.policyreports.controller import REBUILD_EVERY_S
from fivespot.devcluster import localrun
from fivespot.devcluster.clients import service_account_kubeconfig
from fivespot.devcluster.kubectl import apply, kubectl
from fivespot.devcluster.controlplane import ControlPlane
from fivespot.runtime import kube
from tests.integration.capacity_world import (
    DEPLOYMENT_CONSUMER,
    POOLS,
    SCAP,
    ControllerProcess,
    History,
    World,
    current_revision,
    eventually,
    path,
    unique,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent-sandbox" / "config"
REPORT_CRDS = Path(__file__).parent / "testdata" / "policyreport-crds"
NS = "agents"


Change = Callable[[dict[str, Any]], Any]


@pytest.fixture(scope="module")
def plane(module_plane: ControlPlane) -> ControlPlane:
    return module_plane


@pytest.fixture(scope="module")
def admin(module_admin: client.ApiClient) -> client.ApiClient:
    return module_admin


DEPLOYMENTS = DEPLOYMENT_CONSUMER + '''---
apiVersion: config.5spot.finos.org/v1alpha1
kind: TenantPolicy
metadata: {name: lab}
spec:
  namespaces: [lab]
  consumers: [virtualmachinepools]
  maxActiveValue: 10
'''


def config(work: Path, *, tightened: bool) -> Path:
    """The example, plus a Deployment consumer for tenant `agents` and a tenant `lab`; tightened:
    `agents` down from 10 to 5 and without the Deployment consumer, `agents-gpu` on gpu-1 only
    (was gpu-1 and gpu-2), and `lab`'s TenantPolicy gone."""
    config = work / ("config-tightened" if tightened else "config")
    shutil.copytree(EXAMPLE, config)
    tenants = config / "tenants.yaml"
    documents = list(yaml.safe_load_all(tenants.read_text()))
    for document in documents:
        name = (document or {}).get("metadata", {}).get("name")
        if name == "agents":
            document["spec"]["maxActiveValue"] = 5 if tightened else 10
            document["spec"]["consumers"] = (["virtualmachinepools"] if tightened
                                             else ["virtualmachinepools", "deployments"])
        if name == "agents-gpu" and tightened:
            document["spec"]["allowedNodes"] = ["gpu-1"]
    tenants.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    extra = DEPLOYMENTS if not tightened else DEPLOYMENTS.split("---")[0]
    (config / "more.yaml").write_text(extra)
    return config


OUT_OF_POLICY = {("agents", "over"): "exceeds the limit 5 of TenantPolicy agents",
                 ("agents", "web"): "is not a consumer TenantPolicy agents allows",
                 ("agents-gpu", "on-gpu-2"): "is not a node TenantPolicy agents-gpu allows",
                 ("lab", "lab-8"): "has no TenantPolicy", ("lab", "lab-5"): "has no TenantPolicy"}
LAB = {"lab-8": 8, "lab-5": 5}
"""`lab`'s objects and their values, Active before its TenantPolicy is removed."""
WITHIN = {("agents", "under"), ("agents-gpu", "on-gpu-1")}


@pytest.fixture(scope="module")
def tightened(plane: ControlPlane, admin: client.ApiClient,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Objects created under the first policy, Active; then the policy tightened and installed;
    the capacity and audit controllers running as their own ServiceAccounts."""
    work = tmp_path_factory.mktemp("tightened")
    for crd in sorted(REPORT_CRDS.glob("*.yaml")):
        apply(plane.kubeconfig, crd)
    bundle = localrun.compile_and_install(plane.kubeconfig, work / "out-before", config(work, tightened=False))
    localrun.ensure_namespaces(plane.kubeconfig, {"agents", "agents-gpu", "lab"})
    sa = localrun.controller_kubeconfig(plane.kubeconfig, work / "controller.kubeconfig")
    controller = ControllerProcess(sa, bundle, unique("tighten"), work / "controller.log").start()
    auditor: ControllerProcess | None = None
    histories: list[History] = []
    try:
        controller.wait_leading("default", "agents")
        worlds = {ns: World(admin, ns) for ns in ("agents", "agents-gpu", "lab")}
        for world in worlds.values():
            world.schedule("open", True)
        worlds["agents"].pool("over")
        worlds["agents"].scap("over", "open", "over", 8)
        worlds["agents"].pool("under")
        worlds["agents"].scap("under", "open", "under", 4)
        worlds["agents"].deployment("web")
        worlds["agents"].scap("web", "open", "web", 2, capacity_path="spec.replicas",
                              target=("apps/v1", "Deployment"))
        for name, node in (("on-gpu-1", "gpu-1"), ("on-gpu-2", "gpu-2")):
            worlds["agents-gpu"].pool(name)
            worlds["agents-gpu"].scap(name, "open", name, 2, node=node)
        for name, value in LAB.items():
            worlds["lab"].pool(name)
            worlds["lab"].scap(name, "open", name, value)
        worlds["agents"].wait_phase("over", "Active", 60)
        assert worlds["agents"].warm("over") == 8
        for name, value in LAB.items():
            worlds["lab"].wait_phase(name, "Active", 60)
            assert worlds["lab"].warm(name) == value
        history = History(admin, POOLS, current_revision(admin, POOLS))
        lab_history = History(admin, POOLS, current_revision(admin, POOLS, "lab"), "lab")
        histories += [history, lab_history]
        out = work / "out"
        bundle = localrun.compile_and_install(plane.kubeconfig, out, config(work, tightened=True))
        in_force = current_revision(admin, POOLS)
        audit_sa = service_account_kubeconfig(plane.kubeconfig, localrun.INSTALL_NAMESPACE,
                                              "fivespot-audit-controller", work / "audit.kubeconfig")
        auditor = ControllerProcess(audit_sa, bundle, unique("audit"), work / "audit.log",
                                    controller="audit").start()
        auditor.wait_leading("default", "agents")
        yield {"world": worlds["agents"], "lab": worlds["lab"], "out": out,
               "controller": controller, "auditor": auditor, "history": history,
               "lab_history": lab_history, "in_force": int(in_force), "work": work}
    finally:
        for each in histories:
            each.stop()
        if auditor is not None:
            auditor.terminate()
        controller.terminate()


# --- impact: fivespot audit, and what the server says ---------------------------------------------


def _audit(out: Path, *args: str) -> tuple[int, dict[str, Any]]:
    answer = subprocess.run([sys.executable, "-m", "fivespot", "audit", str(out), "-o", "json",
                             *args], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert answer.returncode in (0, 1), answer.stderr
    return answer.returncode, json.loads(answer.stdout)


def _dry_run_create(admin: client.ApiClient, stored: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The server's answer to creating the stored object today (admission runs before the
    object's existence is looked at: a denial is the policies', a 409 means admitted)."""
    from fivespot.compiler.check.audit import as_created

    meta = stored["metadata"]
    try:
        kube.request(admin, "POST", path(SCAP, ns=meta["namespace"]), body=as_created(stored),
                     query={"dryRun": "All", "fieldValidation": "Strict"})
    except kube.ApiError as error:
        return error.status, dict(error.body)
    return 201, {}


def test_audit_lists_exactly_what_the_server_would_now_deny_in_its_own_words(
        tightened: dict[str, Any], plane: ControlPlane, admin: client.ApiClient) -> None:
    code, live = _audit(tightened["out"], "--kubeconfig", str(plane.kubeconfig))
    assert code == 1
    found = {(d["object"]["namespace"], d["object"]["name"]): d for d in live["denied"]}
    assert set(found) == set(OUT_OF_POLICY)
    for key, words in OUT_OF_POLICY.items():
        assert words in found[key]["status"]["message"]
        stored = kube.request(admin, "GET", path(SCAP, key[1], ns=key[0]))
        status, body = _dry_run_create(admin, stored)
        ours = found[key]["status"]
        assert (ours["code"], ours["reason"], ours["message"], ours["causes"]) == (
            body["code"], body["reason"], body["message"], body["details"].get("causes")), key
    for ns, name in WITHIN:
        stored = kube.request(admin, "GET", path(SCAP, name, ns=ns))
        assert _dry_run_create(admin, stored)[0] == 409, "admitted: only the name is taken"
    assert live["summary"]["denied"] == len(OUT_OF_POLICY)
    # The same objects exported, audited offline.
    export = tightened["work"] / "export.yaml"
    export.write_text(kubectl(plane.kubeconfig, "get", "scheduledcapacities", "-A", "-o", "yaml"))
    code, offline = _audit(tightened["out"], "--from", str(export))
    assert code == 1
    assert [d["status"] for d in offline["denied"]] == [d["status"] for d in live["denied"]]


# --- reports after: the audit controller's PolicyReports ---------------------------------------


def _report(admin: client.ApiClient, ns: str) -> dict[str, Any] | None:
    try:
        return kube.request(admin, "GET", "/apis/wgpolicyk8s.io/v1alpha2/namespaces/"
                            f"{ns}/policyreports/fivespot-scheduledcapacities")
    except kube.ApiError as error:
        if error.not_found:
            return None
        raise


def _failing(report: dict[str, Any] | None) -> set[str]:
    return {r["resources"][0]["name"] for r in (report or {}).get("results", []) if r["result"] == "fail"}


REPORT_BOUND_S = 10.0
"""A report follows a change of an object or a tenant's limits within this (event-driven: in
practice about a second), on a loaded two-core machine."""


def test_the_policy_reports_list_the_objects_out_of_policy_with_checks_messages(
        tightened: dict[str, Any], admin: client.ApiClient) -> None:
    for ns in ("agents", "agents-gpu", "lab"):
        expected = {name for n, name in OUT_OF_POLICY if n == ns}
        report = eventually(lambda: (r := _report(admin, ns)) is not None and _failing(r) == expected
                            and r, REPORT_BOUND_S, f"{ns}'s report")
        passed = {r["resources"][0]["name"] for r in report["results"] if r["result"] == "pass"}
        assert passed == {name for n, name in WITHIN if n == ns}
        assert report["summary"]["fail"] == len(expected)
        for result in report["results"]:
            if result["result"] == "fail":
                assert OUT_OF_POLICY[(ns, result["resources"][0]["name"])] in result["message"]
    metrics = tightened["auditor"].metrics()
    assert 'fivespot_objects_out_of_policy{namespace="agents"} 2.0' in metrics
    tightened["gauge_before"] = metrics


def update(admin: client.ApiClient, name: str, change: Change) -> tuple[bool, dict[str, Any]]:
    """A server-side dry-run update of the stored object with `change` applied: (allowed, Status)."""
    stored = kube.request(admin, "GET", path(SCAP, name, ns=NS))
    new = copy.deepcopy(stored)
    change(new)
    try:
        kube.request(admin, "PUT", path(SCAP, name, ns=NS), body=new,
                     query={"dryRun": "All", "fieldValidation": "Strict"})
    except kube.ApiError as error:
        return False, dict(error.body)
    return True, {}


def checked(out: Path, stored: dict[str, Any], new: dict[str, Any], work: Path) -> dict[str, Any]:
    """`fivespot check --old` on the same pair, as a tenant's CI would run it."""
    old_file, new_file = work / "old.yaml", work / "new.yaml"
    for file, obj in ((old_file, stored), (new_file, new)):
        file.write_text(yaml.safe_dump(_as_written(obj)))
    answer = subprocess.run([sys.executable, "-m", "fivespot", "check", "--policies", str(out),
                             str(new_file), "--old", str(old_file), "-o", "json"],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert answer.returncode in (0, 1), answer.stderr
    (result,) = json.loads(answer.stdout)["results"]
    return dict(result)


def _as_written(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    kept = {k: meta[k] for k in ("name", "namespace", "labels") if k in meta}
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": kept,
            "spec": obj["spec"]}


CHANGES: dict[str, tuple[bool, Change]] = {
    "disable": (True, lambda o: o["spec"].update(enabled=False)),
    "kill switch": (True, lambda o: o["spec"].update(killSwitch=True)),
    "a lower value, still over": (True, lambda o: o["spec"]["capacity"].update(activeValue=7)),
    "a label edit": (True, lambda o: o["metadata"].setdefault("labels", {}).update(team="a")),
    "a higher value": (False, lambda o: o["spec"]["capacity"].update(activeValue=9)),
    "another target": (False, lambda o: o["spec"]["targetRef"].update(name="under")),
}


@pytest.mark.parametrize("what", sorted(CHANGES))
def test_an_update_of_an_object_over_the_lowered_limit_is_admitted_unless_it_makes_it_worse(
        tightened: dict[str, Any], admin: client.ApiClient, what: str) -> None:
    expected, change = CHANGES[what]
    allowed, status = update(admin, "over", change)
    assert allowed is expected, status
    stored = kube.request(admin, "GET", path(SCAP, "over", ns=NS))
    new = copy.deepcopy(stored)
    change(new)
    result = checked(tightened["out"], stored, new, tightened["work"])
    assert result["allowed"] is allowed
    if not allowed:
        ours = result["status"]
        assert (ours["code"], ours["reason"], ours["message"]) == (
            status["code"], status["reason"], status["message"]), "check says what the server says"
        assert "of TenantPolicy agents" in ours["message"] or "fivespot-" in ours["message"]


def test_a_new_object_over_the_lowered_limit_is_denied(tightened: dict[str, Any]) -> None:
    world: World = tightened["world"]
    with pytest.raises(kube.ApiError) as denied:
        world.scap(unique("new"), "open", "under", 6)
    assert "exceeds the limit 5 of TenantPolicy agents; set it to at most 5" in denied.value.message


HANDBACK_BOUND_S = 60.0
"""An object the policies in force now deny is handed back to 0 within this: a lowered limit's,
and a removed tenancy's."""


def test_the_controller_writes_nothing_above_the_lowered_limit_and_says_why(
        tightened: dict[str, Any]) -> None:
    world: World = tightened["world"]
    history: History = tightened["history"]
    eventually(lambda: world.warm("over") == 0, HANDBACK_BOUND_S,
               "the object over the limit handed back to 0")
    stalled = eventually(lambda: (c := world.condition("over", "Stalled")).get("reason") == "OutOfPolicy"
                         and c, HANDBACK_BOUND_S, "Stalled=True/OutOfPolicy")
    assert "exceeds the limit 5 of TenantPolicy agents" in stalled["message"]
    assert world.phase("over") in ("HandingBack", "Inactive")
    assert world.warm("under") == 4 and world.phase("under") == "Active", "within the limit: untouched"
    # Lowered to comply (always admitted), it is Active again at the new value.
    kube.merge_patch(world.api, path(SCAP, "over", ns=NS), {"spec": {"capacity": {"activeValue": 5}}})
    world.wait_phase("over", "Active", 60)
    assert world.warm("over") == 5
    in_force: int = tightened["in_force"]
    over_the_limit = [(rv, obj["spec"].get("warmReplicas")) for rv, _, obj in history.of("over")
                      if rv > in_force and (obj["spec"].get("warmReplicas") or 0) > 5]
    assert over_the_limit == [], "no value above the new limit after it was in the cluster"
    writes = [e["value"] for e in tightened["controller"].writes()
              if e.get("target", "").endswith("/over") and int(e["resource_version"]) > in_force]
    assert writes and all(value <= 5 for value in writes), writes


def test_a_namespace_taken_out_of_every_tenant_policy_is_handed_back_to_zero_without_a_restart(
        tightened: dict[str, Any]) -> None:
    """`lab`'s TenantPolicy is gone from the output installed; the controller still runs the
    bundle from before (no restart, no rollout). Its objects at 8 and 5 go to 0 within the bound
    a lowered limit's do, say why, and a schedule that closes and opens again gives nothing back."""
    lab: World = tightened["lab"]
    for name in LAB:
        eventually(lambda: lab.warm(name) == 0, HANDBACK_BOUND_S, f"{name} handed back to 0")
        stalled = eventually(lambda: (c := lab.condition(name, "Stalled")).get("reason")
                             == "OutOfPolicy" and c, HANDBACK_BOUND_S, f"{name} Stalled=True/OutOfPolicy")
        assert OUT_OF_POLICY[("lab", name)] in stalled["message"]
    lab.set_active("open", False)
    for name in LAB:
        lab.wait_phase(name, "Inactive", 60)
    lab.set_active("open", True)
    for name in LAB:
        eventually(lambda: (lab.status(name).get("schedule") or {}).get("active") is True, 60,
                   f"{name} saw its schedule open again")
        assert lab.warm(name) == 0 and lab.phase(name) != "Active"
        assert lab.condition(name, "Stalled").get("reason") == "OutOfPolicy"
    in_force: int = tightened["in_force"]
    history: History = tightened["lab_history"]
    given_back = [(name, rv, obj["spec"].get("warmReplicas")) for name in LAB
                  for rv, _, obj in history.of(name)
                  if rv > in_force and (obj["spec"].get("warmReplicas") or 0) > 0]
    assert given_back == [], "no capacity in lab once its TenantPolicy was gone from the cluster"
    writes = [e["value"] for e in tightened["controller"].writes()
              if e.get("target", "").rsplit("/", 1)[-1] in LAB
              and int(e["resource_version"]) > in_force]
    assert all(value == 0 for value in writes), writes


def test_a_report_clears_when_the_object_is_fixed_or_the_policy_relaxed(
        tightened: dict[str, Any], plane: ControlPlane, admin: client.ApiClient) -> None:
    """Runs after the controller test, which lowered `over` to comply."""
    eventually(lambda: _failing(_report(admin, "agents")) == {"web"}, REPORT_BOUND_S,
               "over cleared once fixed")
    relaxed = config(tightened["work"] / "relaxed", tightened=True)
    tenants = relaxed / "tenants.yaml"
    tenants.write_text(tenants.read_text().replace("allowedNodes:\n  - gpu-1\n",
                                                   "allowedNodes:\n  - gpu-1\n  - gpu-2\n"))
    (relaxed / "lab.yaml").write_text(DEPLOYMENTS.split("---")[1])
    localrun.compile_and_install(plane.kubeconfig, tightened["work"] / "out-relaxed", relaxed)
    # A tenant's limits are params objects, read from the cluster: in force at once.
    eventually(lambda: _failing(_report(admin, "agents-gpu")) == set(), REPORT_BOUND_S,
               "on-gpu-2 cleared once gpu-2 is allowed again")
    # Which namespaces are tenants is read from the cluster's policies too: in force at once, the
    # audit controller still running the bundle that has no `lab`.
    eventually(lambda: _failing(_report(admin, "lab")) == set(), REPORT_BOUND_S,
               "lab cleared once its TenantPolicy is back")
    tightened["gauge_after"] = tightened["auditor"].metrics()
    assert 'fivespot_objects_out_of_policy{namespace="lab"} 0.0' in tightened["gauge_after"]


def test_the_out_of_policy_alert_fires_on_the_gauge_and_resolves(tightened: dict[str, Any]) -> None:
    """The compiled alert rule, evaluated by Prometheus' own promtool on the gauge values the
    audit controller reported before and after the fix: firing after its 15 minutes, resolved
    once the count is back to 0."""
    from fivespot.compiler.emit.monitoring import OUT_OF_POLICY as ALERT
    from tests.integration.promtool import rule_test

    def gauge(metrics: str, ns: str) -> float:
        line = next(l for l in metrics.splitlines()
                    if l.startswith(f'fivespot_objects_out_of_policy{{namespace="{ns}"}}'))
        return float(line.rsplit(" ", 1)[1])

    assert {"gauge_before", "gauge_after"} <= set(tightened), (
        "runs after the report tests, which read the gauge before and after the fix: run the module")
    before, after = gauge(tightened["gauge_before"], "lab"), gauge(tightened["gauge_after"], "lab")
    assert (before, after) == (2.0, 0.0)
    rule_test(ALERT, series='fivespot_objects_out_of_policy{namespace="lab", pod="a"}',
              values=f"{before:g}x20 {after:g}x20", firing_at="17m", resolved_at="30m",
              labels={"namespace": "lab"}, work=tightened["work"])


QUIET_S = REBUILD_EVERY_S + 1.0
"""Longer than a paced rebuild can wait to be queued (decision 0046): a queue this quiet has
nothing left to come."""


def _total(metrics: str, name: str, **labels: str) -> float:
    """The sum of a metric's samples over every label set that has `labels`."""
    return sum(sample.value for family in text_string_to_metric_families(metrics)
               for sample in family.samples if sample.name == name
               and all(sample.labels.get(key) == value for key, value in labels.items()))


def _queue_adds(metrics: str) -> float:
    """Keys the process has queued so far, over all its queues."""
    return _total(metrics, "fivespot_workqueue_adds_total")


def test_a_boundary_sends_the_audit_controller_no_work_and_a_label_change_does(
        tightened: dict[str, Any], admin: client.ApiClient) -> None:
    """The capacity controller's status writes at a boundary leave what a create of each object
    would show the policies as it was: the audit controller queues nothing for them (each of
    its reconciles judges a whole namespace); a label, which a policy may read, is queued. Its
    object is deleted at the end, leaving `agents` as the report tests list it."""
    world, auditor = tightened["world"], tightened["auditor"]
    world.schedule("quiet", True)
    world.pool("quiet")
    world.scap("quiet", "quiet", "quiet", 1)
    try:
        _status_writes_queue_nothing(world, auditor, admin)
    finally:
        kube.request(admin, "DELETE", path(SCAP, "quiet", ns=world.ns))


def _status_writes_queue_nothing(world: World, auditor: ControllerProcess,
                                 admin: client.ApiClient) -> None:
    world.wait_phase("quiet", "Active", 60)
    since: list[tuple[float, float]] = []  # (when the count was first seen, the count)

    def settled() -> bool:
        count = _queue_adds(auditor.metrics())
        if not since or since[-1][1] != count:
            since.append((time.monotonic(), count))
        return time.monotonic() - since[-1][0] >= QUIET_S

    eventually(settled, 60, f"the audit controller's queue quiet for {QUIET_S:g} s")
    before = since[-1][1]
    for active, phase in ((False, "Inactive"), (True, "Active")):
        world.set_active("quiet", active)
        world.wait_phase("quiet", phase, 60)
    time.sleep(2.0)
    assert _queue_adds(auditor.metrics()) == before, "a status write queued a judgement"
    kube.merge_patch(admin, path(SCAP, "quiet", ns=world.ns), {"metadata": {"labels": {"tier": "b"}}})
    eventually(lambda: _queue_adds(auditor.metrics()) > before, REPORT_BOUND_S,
               "a label change queued its namespace")


BURST = 40


def _report_writes(metrics: str) -> float:
    """PolicyReports the audit controller has written so far."""
    return _total(metrics, "fivespot_writes_total", what="policyreport")


def _listed(report: dict[str, Any] | None) -> set[str]:
    return {r["resources"][0]["name"] for r in (report or {}).get("results", [])}


def test_a_burst_of_creates_is_reported_within_the_bound_in_a_rebuild_every_few_seconds(
        tightened: dict[str, Any], admin: client.ApiClient) -> None:
    """A namespace's report is rebuilt at most once every REBUILD_EVERY_S (decision 0046): a
    burst of creates, as a GitOps sync or an import makes, is judged in a few rebuilds rather
    than one per create, and every object is still in the report within the bound. Its objects
    are deleted at the end."""
    world, auditor = tightened["world"], tightened["auditor"]
    names = [f"burst-{index}" for index in range(BURST)]
    before = _report_writes(auditor.metrics())
    try:
        started = time.monotonic()
        for name in names:
            world.scap(name, "open", name, 1)
        created = time.monotonic()
        eventually(lambda: set(names) <= _listed(_report(admin, world.ns)), REPORT_BOUND_S,
                   f"{BURST} new objects in {world.ns}'s report")
        took = time.monotonic() - created
        writes = _report_writes(auditor.metrics()) - before
        print(f"audit: {BURST} creates in {created - started:.2f} s, all reported {took:.2f} s "
              f"after the last, in {writes:g} report writes")
        assert writes <= 2 + math.ceil((created - started) / REBUILD_EVERY_S), writes
    finally:
        for name in names:
            kube.request(admin, "DELETE", path(SCAP, name, ns=world.ns))
    eventually(lambda: not set(names) & _listed(_report(admin, world.ns)), REPORT_BOUND_S,
               "the burst's objects gone from the report")
