"""The compiled Argo CD and Flux objects against the real upstream CRDs (testdata/gitops-crds, with
their sources) on the real API server, with strict field validation: the Application, the
AppProject, the health keys of argocd-cm, the GitRepository / OCIRepository, the entry
Kustomization and every layer Kustomization are accepted with no unknown or invalid field."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from compiler.output import write_tree
from compiler.pipeline import compile_repo
from devcluster.kubectl import FIELD_MANAGER, kubectl, wait_established

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


def test_the_health_keys_join_an_existing_argocd_cm_without_touching_its_other_keys(
        kubeconfig: Path, admin: client.ApiClient, gitops_crds: None, tmp_path: Path) -> None:
    core = client.CoreV1Api(admin)
    existing = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "argocd-cm", "namespace": "argocd",
                             "labels": {"app.kubernetes.io/name": "argocd-cm",
                                        "app.kubernetes.io/part-of": "argocd"}},
                "data": {"url": "https://argocd.example.com", "timeout.reconciliation": "180s"}}
    kubectl(kubeconfig, "apply", "--server-side", "--field-manager=argocd-install", "-f", "-",
            stdin=yaml.safe_dump(existing))
    out = _compiled(tmp_path, {})
    _apply_strict(kubeconfig, out / "argocd" / "argocd-cm.health.yaml")
    data = core.read_namespaced_config_map("argocd-cm", "argocd").data
    assert data["url"] == "https://argocd.example.com" and data["timeout.reconciliation"] == "180s"
    assert "resource.customizations.health.5spot.finos.org_ScheduledCapacity" in data
    assert core.read_namespaced_config_map("argocd-cm", "argocd").metadata.labels[
        "app.kubernetes.io/part-of"] == "argocd"
