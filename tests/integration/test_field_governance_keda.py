"""An autoscaler on a gated Deployment is a second governor of its `spec.replicas` (decision record
0029), refused in the same words offline and live: a HorizontalPodAutoscaler, and a KEDA
ScaledObject against KEDA's real CRD (`keda.sh_scaledobjects.yaml` of the pinned module,
`fivespot.devcluster.upstream_crds`; KEDA itself is not run, only its object's `scaleTargetRef` matters).

- Offline: `fivespot check --policies OUT` on the Deployment, the autoscaler and the
  ScheduledCapacity refuses the ScheduledCapacity.
- Live, at admission: the real API server calls the webhook (running as its own ServiceAccount
  over TLS, as in test_webhook_admission), which lists the namespace's autoscalers through its
  own RBAC and refuses the ScheduledCapacity with the same message.
- Live, in the controller: an autoscaler arriving after the ScheduledCapacity makes it write
  nothing, `FieldGovernanceConflict=True/FieldScaledByAutoscaler` with the same message; for KEDA
  its CRD is installed after the controller started (a kind watched once its CRD appears).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from kubernetes import client

from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo
from fivespot.devcluster import localrun
from fivespot.devcluster.kubectl import install, kubectl
from fivespot.devcluster.upstream_crds import ensure_keda_scaledobject_crd
from fivespot.runtime import kube
from tests.integration.capacity_world import (
    DEPLOYMENTS,
    SCAP,
    ControllerProcess,
    World,
    allow_deployments,
    eventually,
    path,
    unique,
)
from tests.integration.test_webhook_admission import (
    EXAMPLE,
    INSTALL_NS,
    TENANT,
    _ensure_namespace,
    _rewrite_to_local_url,
    denial,
    free_port,
    serving,
)

pytestmark = pytest.mark.integration

HOOK: Final = 'admission webhook "field-governance.5spot.finos.org" denied the request: '
HPAS: Final = ("autoscaling", "v2", "horizontalpodautoscalers")
SCALED_OBJECTS: Final = ("keda.sh", "v1alpha1", "scaledobjects")
FIVESPOT: Final = Path(sys.executable).parent / "fivespot"


def _hpa(name: str, deployment: str) -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": TENANT},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
                     "minReplicas": 1, "maxReplicas": 4}}


def _scaled_object(name: str, deployment: str) -> dict[str, Any]:
    """A ScaledObject as KEDA's docs write one: the target by name alone (a Deployment)."""
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": name, "namespace": TENANT},
            "spec": {"scaleTargetRef": {"name": deployment}, "minReplicaCount": 1, "maxReplicaCount": 4,
                     "triggers": [{"type": "cron", "metadata": {
                         "timezone": "UTC", "start": "0 8 * * 1-5", "end": "0 18 * * 1-5",
                         "desiredReplicas": "3"}}]}}


AUTOSCALERS: Final = {"hpa": (_hpa, HPAS), "keda": (_scaled_object, SCALED_OBJECTS)}


def _deployment(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": TENANT},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "x"}]}}}}


def _scap(name: str, schedule: str, deployment: str) -> dict[str, Any]:
    return {"apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
            "metadata": {"name": name, "namespace": TENANT},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": schedule},
                     "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
                     "capacity": {"path": "spec.replicas", "activeValue": 3}}}


def offline(out: Path, work: Path, *objects: dict[str, Any]) -> str:
    """`fivespot check --policies OUT` on a folder holding `objects` (one file each); its output,
    after checking it exits 1 (a denial)."""
    folder = work / f"check-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    for index, obj in enumerate(objects):
        (folder / f"{index}-{obj['kind'].lower()}.yaml").write_text(yaml.safe_dump(obj, sort_keys=False))
    done = subprocess.run([str(FIVESPOT), "check", "--policies", str(out), str(folder)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def installed(kubeconfig: Path, admin: client.ApiClient,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """The example with a Deployment consumer, installed; the webhook serving and the capacity
    controller leading; KEDA's CRD installed only after both started. (OUT, a work folder)."""
    work = tmp_path_factory.mktemp("autoscalers")
    config = work / "config"
    shutil.copytree(EXAMPLE / "config", config)
    allow_deployments(config, TENANT)
    compiled = compile_repo(config)
    out = work / "out"
    write_tree(compiled.files, out)
    port = free_port()
    _rewrite_to_local_url(out, port)
    core = client.CoreV1Api(admin)
    for name in {TENANT, INSTALL_NS, *(n for t in compiled.repo.tenants for n in t.spec.namespaces)}:
        _ensure_namespace(core, name)
    install(kubeconfig, out, [EXAMPLE / "consumer" / "virtualmachinepools.yaml"])
    crd = ensure_keda_scaledobject_crd()
    sa = localrun.controller_kubeconfig(kubeconfig, work / "controller.kubeconfig")
    controller = ControllerProcess(sa, out / "bundle.json", unique("autoscalers-it"),
                                   work / "controller.log").start()
    try:
        controller.wait_leading(TENANT, "default", timeout=60)
        with serving(kubeconfig, admin, out, port, ["--workers", "1"]):
            probe = _scap(f"probe-{uuid.uuid4().hex[:6]}", "window", "nothing")
            objects = client.CustomObjectsApi(admin)
            eventually(lambda: True if denial(lambda: objects.create_namespaced_custom_object(
                *SCAP[:2], TENANT, SCAP[2], probe, dry_run="All")) is None else None, 60, "the webhook")
            kubectl(kubeconfig, "apply", "--server-side", "-f", str(crd))
            kubectl(kubeconfig, "wait", "--for=condition=Established", "--timeout=60s", "-f", str(crd))
            yield out, work
    finally:
        controller.terminate()
        kubectl(kubeconfig, "delete", "--ignore-not-found", "--wait=false", "-f", str(crd))


@pytest.mark.parametrize("autoscaler", list(AUTOSCALERS))
def test_a_scheduled_capacity_on_a_deployment_an_autoscaler_scales_is_refused_live_in_the_words_of_check(
        installed: tuple[Path, Path], admin: client.ApiClient, autoscaler: str) -> None:
    out, work = installed
    make, resource = AUTOSCALERS[autoscaler]
    tag = unique(autoscaler)
    deployment, scaler = _deployment(f"{tag}-web"), make(f"{tag}-scaler", f"{tag}-web")
    scap = _scap(f"{tag}-cap", f"{tag}-open", f"{tag}-web")
    checked = offline(out, work, deployment, scaler, scap)
    kube.request(admin, "POST", path(DEPLOYMENTS), body=deployment)
    kube.request(admin, "POST", path(resource), body=scaler)
    objects = client.CustomObjectsApi(admin)
    live = denial(lambda: objects.create_namespaced_custom_object(*SCAP[:2], TENANT, SCAP[2], scap))
    assert live is not None and live.startswith(HOOK), live
    message = live.removeprefix(HOOK)
    assert f"Gate its {'spec.minReplicas' if autoscaler == 'hpa' else 'spec.minReplicaCount'} instead" \
        in message, message
    # offline, the same words, then where the autoscaler is defined
    assert f"{message}. {scaler['kind']}." in checked, (message, checked)


def test_a_keda_scaledobject_arriving_on_a_governed_deployment_makes_it_write_nothing_in_the_words_of_check(
        installed: tuple[Path, Path], admin: client.ApiClient) -> None:
    out, work = installed
    world = World(admin, TENANT)
    tag = unique("keda-late")
    web, schedule, cap = f"{tag}-web", f"{tag}-open", f"{tag}-cap"
    world.deployment(web)
    world.schedule(schedule, True)
    scap = _scap(cap, schedule, web)
    kube.request(admin, "POST", path(SCAP), body=scap)
    world.wait_phase(cap, "Active", 60)
    eventually(lambda: kube.request(admin, "GET", path(DEPLOYMENTS, web))["spec"]["replicas"] == 3,
               30, "the active value")
    scaler = _scaled_object(f"{tag}-scaler", web)
    kube.request(admin, "POST", path(SCALED_OBJECTS), body=scaler)
    world.wait_phase(cap, "Error", 60)
    conflict = world.condition(cap, "FieldGovernanceConflict")
    assert (conflict["status"], conflict["reason"]) == ("True", "FieldScaledByAutoscaler"), conflict
    checked = offline(out, work, _deployment(web), scaler, scap)
    assert f"{conflict['message']}. ScaledObject.keda.sh" in checked, (conflict["message"], checked)
    # it writes nothing now: a rewrite stays
    kube.merge_patch(admin, path(DEPLOYMENTS, web), {"spec": {"replicas": 2}})
    time.sleep(2)
    assert world.condition(cap, "FieldGovernanceConflict").get("status") == "True"
    assert kube.request(admin, "GET", path(DEPLOYMENTS, web))["spec"]["replicas"] == 2
    # the ScaledObject gone, the ScheduledCapacity governs again
    kube.request(admin, "DELETE", path(SCALED_OBJECTS, scaler["metadata"]["name"]))
    world.wait_phase(cap, "Active", 60)
    eventually(lambda: kube.request(admin, "GET", path(DEPLOYMENTS, web))["spec"]["replicas"] == 3,
               30, "the active value again")
