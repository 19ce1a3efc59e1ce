"""The compiled Argo CD and Flux objects against the real upstream CRDs (testdata/gitops-crds, with
their sources) on the real API server, with strict field validation: the Application, the
AppProject, the health keys of argocd-cm, the GitRepository / OCIRepository, the entry
Kustomization and every layer Kustomization are accepted with no unknown or invalid field. And
argocd-cm, which two owners apply: Argo CD's install and fivespot's health keys each keep the
other's keys, in either order; argocd-cmd-params-cm's self-heal keys likewise, and a key the
install already set to another value is a conflict, never overwritten."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from fivespot.compiler.emit.gitops import ARGOCD_CM_APPLY, ARGOCD_CMD_PARAMS_APPLY, ARGOCD_CMD_PARAMS_FILE
from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo
from fivespot.devcluster.engines import cached_engines, ensure_engines, Engines
from fivespot.devcluster.kubectl import FIELD_MANAGER, kubectl, wait_established

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
CRDS = HERE / "testdata" / "gitops-crds"
EXAMPLE = HERE.parents[1] / "examples" / "agent-sandbox" / "config"


@pytest.fixture(scope="module")
def gitops_crds(kubeconfig: Path) -> None:
    files = sorted(CRDS.glob("*.yaml"))
    for crd in files:
        kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", str(crd))
    names = [yaml.safe_load(f.read_text())["metadata"]["name"] for f in files]
    wait_established(kubeconfig, names)
    for namespace in ("argocd", "flux-system"):
        manifest = yaml.safe_dump({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=manifest)


def engines() -> Engines:
    return cached_engines() or ensure_engines()


def _compiled(tmp_path: Path, flux: dict[str, Any]) -> Path:
    config = tmp_path / "config"
    shutil.copytree(EXAMPLE, config)
    platform = yaml.safe_load((config / "platform.yaml").read_text())
    platform["spec"]["gitops"]["flux"].update(flux)
    (config / "platform.yaml").write_text(yaml.safe_dump(platform))
    out = tmp_path / "out"
    write_tree(compile_repo(config).files, out)
    return out


def _apply_strict(kubeconfig: Path, path: Path) -> str:
    """Server-side apply with strict field validation: an unknown or duplicate field is an error,
    not a warning."""
    return kubectl(kubeconfig, "apply", "--server-side", "--validate=strict", "--force-conflicts",
                   f"--field-manager={FIELD_MANAGER}", "-f", str(path))


@pytest.mark.parametrize("flux", [
    {"url": "https://git.example.com/platform/cluster-config.git", "ref": "main"},
    {"url": "oci://ghcr.io/platform/cluster-config", "ref": "v1",
     "sourceRef": {"kind": "OCIRepository", "name": "cluster-config-oci"}},
], ids=["git", "oci"])
def test_every_argo_cd_and_flux_object_is_valid_against_the_upstream_crds(
        kubeconfig: Path, admin: client.ApiClient, gitops_crds: None, tmp_path: Path,
        flux: dict[str, Any]) -> None:
    out = _compiled(tmp_path, flux)
    files = sorted((out / "argocd").glob("*.yaml")) + sorted((out / "flux").rglob("*.yaml"))
    applied = [f for f in files if f.name != "kustomization.yaml"]
    for path in applied:
        output = _apply_strict(kubeconfig, path)
        assert "Warning" not in output, (path, output)
    objects = client.CustomObjectsApi(admin)
    application = objects.get_namespaced_custom_object("argoproj.io", "v1alpha1", "argocd",
                                                       "applications", "fivespot")
    assert application["spec"]["source"]["path"].endswith("/waves")
    project = objects.get_namespaced_custom_object("argoproj.io", "v1alpha1", "argocd",
                                                   "appprojects", "platform")
    assert {"group": "apiextensions.k8s.io", "kind": "CustomResourceDefinition"} in \
        project["spec"]["clusterResourceWhitelist"]
    layers = objects.list_namespaced_custom_object("kustomize.toolkit.fluxcd.io", "v1", "flux-system",
                                                   "kustomizations")["items"]
    chain = {k["metadata"]["name"]: k["spec"] for k in layers}
    assert chain["fivespot"]["path"].endswith("/flux/layers")
    assert chain["fivespot-webhook"]["dependsOn"] == [{"name": "fivespot-workloads"}]
    assert chain["fivespot-webhook"]["healthCheckExprs"][0]["kind"] == "ValidatingWebhookConfiguration"
    kind = flux.get("sourceRef", {}).get("kind", "GitRepository")
    plural = {"GitRepository": "gitrepositories", "OCIRepository": "ocirepositories"}[kind]
    name = flux.get("sourceRef", {}).get("name", "cluster-config")
    source = objects.get_namespaced_custom_object("source.toolkit.fluxcd.io", "v1", "flux-system",
                                                  plural, name)
    assert source["spec"]["url"] == flux["url"]


def _argocd_cm(core: client.CoreV1Api, name: str = "argocd-cm") -> dict[str, str]:
    try:
        return dict(core.read_namespaced_config_map(name, "argocd").data or {})
    except client.ApiException as error:
        if error.status == 404:
            return {}
        raise


def _install(kubeconfig: Path) -> None:
    """Argo CD's base config (its v3.6.2 install's ConfigMaps), applied as its install applies it."""
    kubectl(kubeconfig, "-n", "argocd", "apply", "--server-side", "--force-conflicts", "-k",
            str(engines().argocd_base_config))


def _documented(kubeconfig: Path, out: Path, command: str) -> subprocess.CompletedProcess[str]:
    """A command of the docs, run from the output folder against `kubeconfig`."""
    argv = command.split()
    return subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *argv[1:]], cwd=out,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("first", ["argocd-install", "fivespot"])
def test_argo_cds_install_and_fivespots_health_keys_keep_each_others_keys_in_either_order(
        kubeconfig: Path, admin: client.ApiClient, gitops_crds: None, tmp_path: Path,
        first: str) -> None:
    """Argo CD's own argocd-cm (its v3.6.2 base config, from the module the engines are built
    from), applied as its install applies it (kubectl's default field manager), and fivespot's
    health keys applied with the command the docs (docs/operations/gitops.md) and the file's comment give: each apply, in
    either order and again, leaves the other's keys in place. kubectl's default manager for
    fivespot's file (the docs' command before) is shown to remove the install's keys."""
    core = client.CoreV1Api(admin)
    base_config = engines().argocd_base_config
    install_keys = set(yaml.safe_load((base_config / "argocd-cm.yaml").read_text())["data"])
    out = _compiled(tmp_path, {})
    health_file = out / "argocd" / "argocd-cm.health.yaml"
    health_keys = set(yaml.safe_load(health_file.read_text())["data"])
    assert install_keys and health_keys and not install_keys & health_keys
    assert ARGOCD_CM_APPLY in (HERE.parents[1] / "docs" / "operations" / "gitops.md").read_text()
    assert ARGOCD_CM_APPLY in health_file.read_text()
    kubectl(kubeconfig, "-n", "argocd", "delete", "configmap", "argocd-cm", "--ignore-not-found")

    def install() -> None:
        _install(kubeconfig)

    def fivespot(command: str = ARGOCD_CM_APPLY) -> None:
        done = _documented(kubeconfig, out, command)
        assert done.returncode == 0, done.stderr

    steps = [install, fivespot, install, fivespot]
    if first == "fivespot":
        steps = steps[1:] + steps[:1]
    applied: set[str] = set()
    for step in steps:
        step()
        applied |= install_keys if step is install else health_keys
        data = _argocd_cm(core)
        assert applied <= set(data), f"after {step.__name__}: lost {sorted(applied - set(data))}"
    labels = core.read_namespaced_config_map("argocd-cm", "argocd").metadata.labels
    assert labels["app.kubernetes.io/part-of"] == "argocd"

    # The docs' command before: kubectl's default manager, the install's own.
    kubectl(kubeconfig, "-n", "argocd", "delete", "configmap", "argocd-cm")
    install()
    fivespot("kubectl apply --server-side -f argocd/argocd-cm.health.yaml")
    assert not install_keys & set(_argocd_cm(core)), "kubectl's own manager was expected to take them"
    install()
    assert not health_keys & set(_argocd_cm(core))
    kubectl(kubeconfig, "-n", "argocd", "delete", "configmap", "argocd-cm", "--ignore-not-found")


def test_fivespots_self_heal_keys_survive_argo_cds_install_and_a_key_it_set_otherwise_is_a_conflict(
        kubeconfig: Path, admin: client.ApiClient, gitops_crds: None, tmp_path: Path) -> None:
    """argocd-cmd-params-cm, which Argo CD's install creates without data: fivespot's self-heal
    keys, applied with the command the docs and the file's comment give, stay through the
    install's next apply; and where the install already set one of them to another value, the
    apply fails on that key's conflict and the install's value stays."""
    core = client.CoreV1Api(admin)
    out = _compiled(tmp_path, {})
    params = out / ARGOCD_CMD_PARAMS_FILE
    keys = yaml.safe_load(params.read_text())["data"]
    assert ARGOCD_CMD_PARAMS_APPLY in (HERE.parents[1] / "docs" / "operations" / "gitops.md").read_text()
    assert ARGOCD_CMD_PARAMS_APPLY in params.read_text()
    name = "argocd-cmd-params-cm"
    kubectl(kubeconfig, "-n", "argocd", "delete", "configmap", name, "--ignore-not-found")
    _install(kubeconfig)
    for step in ("fivespot", "install"):
        if step == "fivespot":
            done = _documented(kubeconfig, out, ARGOCD_CMD_PARAMS_APPLY)
            assert done.returncode == 0, done.stderr
        else:
            _install(kubeconfig)
        assert keys.items() <= _argocd_cm(core, name).items(), step

    # an install that already holds the timeout, at another value (under its own manager, kubectl)
    kubectl(kubeconfig, "-n", "argocd", "delete", "configmap", name)
    theirs = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "argocd"},
              "data": {"controller.self.heal.timeout.seconds": "10"}}
    kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(theirs))
    done = _documented(kubeconfig, out, ARGOCD_CMD_PARAMS_APPLY)
    assert done.returncode != 0 and "conflict" in done.stderr.lower(), done
    assert "controller.self.heal.timeout.seconds" in done.stderr, done.stderr
    assert _argocd_cm(core, name) == {"controller.self.heal.timeout.seconds": "10"}
    kubectl(kubeconfig, "-n", "argocd", "delete", "configmap", name, "--ignore-not-found")
