"""`fivespot install` of a fresh `fivespot init` repo makes everything Available on a real control
plane where the compiled Deployments really run (the built image, tests/integration/kubelet.py
playing the node), a ScheduledCapacity is admitted and Active within seconds, a second run
changes nothing, `--dry-run` writes nothing, and `uninstall` keeps the CRDs.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo
from fivespot.compiler.scaffold import init
from fivespot.runtime import kube
from fivespot.devcluster.controlplane import ControlPlane
from tests.integration.conftest import own_control_plane
from tests.integration.kubelet import LocalKubelet
from tests.integration.pod_sandbox import remove, scratch_dir, unpack

# The first test here may build the image (the session fixture `built_image`, up to 30 min
# cold on a loaded machine): the whole item, setup included, gets that long, not 10 min.
pytestmark = pytest.mark.timeout(1800)

CONTROLLERS = ("validatingadmissionpolicy-status-controller", "deployment-controller",
               "replicaset-controller", "endpoints-controller", "endpointslice-controller",
               "garbage-collector-controller", "namespace-controller")
NS = "5spot-system"


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    with own_control_plane(bind_address="0.0.0.0", apiserver_args=["--enable-aggregator-routing=true"],
                           controllers=CONTROLLERS) as own:
        yield own


@pytest.fixture(scope="module")
def node(plane: ControlPlane, built_image: dict[str, Any]) -> Iterator[LocalKubelet]:
    scratch = scratch_dir()
    rootfs = unpack(built_image["layout"], built_image["tag"], scratch / "bundle")
    api = kube.load_cli_client(plane.kubeconfig)
    assert plane.certs is not None
    kubelet = LocalKubelet(api, built_image["reference"], built_image["layout"], built_image["tag"],
                           rootfs, int(plane.server.rsplit(":", 1)[1]),
                           plane.certs.serving_ca.read_bytes())
    kubelet.start()
    try:
        yield kubelet
    finally:
        kubelet.stop()
        api.close()
        remove(scratch)


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("install")
    init(root / "config")
    write_tree(compile_repo(root / "config").files, root / "out")
    return root / "out"


def fivespot(*args: str, timeout_s: float = 420) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fivespot", *args], capture_output=True,
                          text=True, timeout=timeout_s)


def _exists(api: Any, path: str) -> bool:
    try:
        kube.request(api, "GET", path)
    except kube.ApiError as error:
        if error.not_found:
            return False
        raise
    return True


def _until(check: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")


def test_install_from_init_runs_everything_and_a_schedule_flips_a_target(
    plane: ControlPlane, node: LocalKubelet, out: Path
) -> None:
    api = node.api
    kubeconfig = str(plane.kubeconfig)

    dry = fivespot("install", str(out), "--kubeconfig", kubeconfig, "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "nothing stored" in dry.stdout
    assert not _exists(api, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                            "scheduledcapacities.5spot.finos.org")
    assert not _exists(api, f"/api/v1/namespaces/{NS}")

    kube.request(api, "POST", "/api/v1/namespaces", body={"metadata": {"name": "team-a"}})
    started = time.monotonic()
    first = fivespot("install", str(out), "--kubeconfig", kubeconfig)
    assert first.returncode == 0, first.stdout + first.stderr + "\n".join(node.errors)
    print(f"first install: {time.monotonic() - started:.1f}s")
    deployments = kube.request(api, "GET", f"/apis/apps/v1/namespaces/{NS}/deployments")["items"]
    assert {d["metadata"]["name"] for d in deployments} == {
        "fivespot-capacity-controller", "fivespot-audit-controller", "fivespot-provider-manual",
        "fivespot-provider-time-based", "fivespot-webhook"}
    for deployment in deployments:
        conditions = {c["type"]: c["status"] for c in deployment["status"]["conditions"]}
        assert conditions.get("Available") == "True", deployment["metadata"]["name"]
        assert deployment["status"]["availableReplicas"] == deployment["spec"]["replicas"]
    lines = first.stdout.splitlines()
    hooks = next(i for i, line in enumerate(lines) if "webhook configurations" in line)
    assert hooks > lines.index("  wave 3 ready"), "the webhook configuration came before the webhook"
    webhooks = kube.request(api, "GET", "/apis/admissionregistration.k8s.io/v1/"
                                        "validatingwebhookconfigurations/fivespot-webhook")["webhooks"]
    assert all(w["clientConfig"].get("caBundle") for w in webhooks), "install returned before the caBundle"

    kube.request(api, "POST", "/apis/apps/v1/namespaces/team-a/deployments", body={
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}})
    schedules = "/apis/spotschedules.5spot.finos.org/v1alpha1/namespaces/team-a/manualschedules"
    kube.request(api, "POST", schedules, body={
        "apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "ManualSchedule",
        "metadata": {"name": "web"}, "spec": {"enabled": False}})
    scaps = "/apis/5spot.finos.org/v1alpha1/namespaces/team-a/scheduledcapacities"
    scap = {"apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
            "metadata": {"name": "web"},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": "web"},
                     "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "capacity": {"path": "spec.replicas", "activeValue": 3}}}

    def created() -> bool:
        try:
            kube.request(api, "POST", scaps, body=scap)
        except kube.ApiError as error:
            # The stored configuration has its caBundle (asserted above); the API server's
            # admission plugin reads it through an informer, a moment after the injection.
            if "failed calling webhook" in error.message:
                return False
            raise
        return True

    _until(created, 30, "the ScheduledCapacity admitted")

    def phase() -> Any:
        return (kube.request(api, "GET", f"{scaps}/web").get("status") or {}).get("phase")

    _until(lambda: phase() == "Inactive", 60, "the ScheduledCapacity to be Inactive")
    flipped = time.monotonic()
    kube.merge_patch(api, f"{schedules}/web", {"spec": {"enabled": True}})
    _until(lambda: phase() == "Active", 60, "Active after the flip")
    replicas = kube.request(api, "GET", "/apis/apps/v1/namespaces/team-a/deployments/web")["spec"]["replicas"]
    assert replicas == 3
    print(f"flip -> Active: {time.monotonic() - flipped:.2f}s")

    second = fivespot("install", str(out), "--kubeconfig", kubeconfig)
    assert second.returncode == 0, second.stdout + second.stderr
    applied = [line for line in second.stdout.splitlines() if line.startswith("  ") and
               not line.startswith("  wa")]
    assert applied and all(line.endswith(" unchanged") for line in applied), second.stdout

    gone = fivespot("uninstall", str(out), "--kubeconfig", kubeconfig)
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert _exists(api, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                        "scheduledcapacities.5spot.finos.org")
    assert _exists(api, f"{scaps}/web"), "uninstall must keep the tenants' objects"
    assert _exists(api, "/apis/apps/v1/namespaces/team-a/deployments/web"), \
        "the tenant namespace stays, with its workloads"
    assert "kept the namespaces" in gone.stdout
    assert not _exists(api, "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/"
                            "fivespot-webhook")


def test_the_kind_script_loads_the_archive_and_installs_through_the_kind_context(
    plane: ControlPlane, node: LocalKubelet, built_image: dict[str, Any], tmp_path: Path
) -> None:
    """Docker cannot run here, so `kind` is a recording stand-in and the context `kind-fivespot`
    names the local control plane; everything after `kind load` is the real install."""
    import os
    import stat

    import yaml

    calls = tmp_path / "kind-calls.txt"
    fake = tmp_path / "kind"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n[ "$1" = get ] && echo fivespot\nexit 0\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    raw = yaml.safe_load(plane.kubeconfig.read_text())
    raw["contexts"][0]["name"] = raw["current-context"] = "kind-fivespot"
    raw["current-context"] = "somewhere-else"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(raw))
    config = tmp_path / "config"
    init(config)
    platform = config / "platform.yaml"
    platform.write_text(platform.read_text().replace("namespace: 5spot-system", "namespace: fivespot-kind"))
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "KIND": str(fake), "KUBECONFIG": str(kubeconfig),
           "ARCHIVE": str(built_image["archive"]), "OUT": str(tmp_path / "out"),
           "FIVESPOT": f"{Path(sys.executable).parent / 'fivespot'}"}
    done = subprocess.run([str(root / "image" / "kind.sh"), str(config)], env=env,
                          capture_output=True, text=True, timeout=420)
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls.read_text().splitlines() == [
        "get clusters", f"load image-archive {built_image['archive']} --name fivespot"]
    deployments = kube.request(node.api, "GET", "/apis/apps/v1/namespaces/fivespot-kind/deployments")
    assert deployments["items"] and all(
        d["status"].get("availableReplicas") == d["spec"]["replicas"] for d in deployments["items"])
