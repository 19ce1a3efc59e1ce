"""`fivespot install` reads the compiled output as kubectl -k would and orders it as Argo CD would."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from fivespot.compiler.emit.gitops import SYNC_WAVE as COMPILED_SYNC_WAVE
from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo
from fivespot.deploy import health
from fivespot.deploy.installer import _action, install_steps, uninstall_order
from fivespot.deploy.manifests import SYNC_WAVE, OutputError, load, waves

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent-sandbox" / "config"


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("deploy") / "out"
    write_tree(compile_repo(EXAMPLE).files, folder)
    return folder


def test_install_reads_the_wave_annotation_the_compiler_writes() -> None:
    assert SYNC_WAVE == COMPILED_SYNC_WAVE


def test_install_applies_what_the_root_kustomization_reaches_and_not_the_gitops_objects(out: Path) -> None:
    manifests = load(out)
    sources = {m.source.parts[0] for m in manifests}
    assert sources == {"crds", "rbac", "admission", "workloads", "webhook", "schedules"}
    assert not {"Application", "Kustomization"} & {m.kind for m in manifests}
    compiled = sum(1 for p in out.rglob("*.yaml") if p.relative_to(out).parts[0] not in ("argocd", "flux")
                   and p.name != "kustomization.yaml")
    assert len(manifests) == compiled


def test_an_output_with_a_waves_kustomization_is_installed_from_it(out: Path, tmp_path: Path) -> None:
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    (copy / "waves").mkdir(exist_ok=True)
    (copy / "waves" / "kustomization.yaml").write_text(yaml.safe_dump(
        {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
         "resources": ["../crds", "../rbac"]}))
    assert {m.source.parts[0] for m in load(copy)} == {"crds", "rbac"}


def test_waves_follow_the_declared_sync_waves_in_ascending_order(out: Path) -> None:
    ordered = waves(load(out))
    numbers = [w.number for w in ordered]
    assert numbers == sorted(numbers) and len(numbers) == len(set(numbers))
    by_wave = {w.number: {m.kind for m in w.manifests} for w in ordered}
    crd_wave = next(n for n, kinds in by_wave.items() if "CustomResourceDefinition" in kinds)
    deployment_wave = next(n for n, kinds in by_wave.items() if "Deployment" in kinds)
    assert crd_wave < deployment_wave
    for wave in ordered:
        for manifest in wave.manifests:
            assert manifest.wave == int(manifest.obj["metadata"]["annotations"][SYNC_WAVE])


def test_a_later_wave_declared_in_the_output_is_applied_later(out: Path, tmp_path: Path) -> None:
    """The order comes from the output: move the webhook configuration after the workloads."""
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    webhook = next(copy.rglob("*validatingwebhookconfiguration.yaml"))
    obj = yaml.safe_load(webhook.read_text())
    obj["metadata"]["annotations"][SYNC_WAVE] = "7"
    webhook.write_text(yaml.safe_dump(obj))
    last = waves(load(copy))[-1]
    assert last.number == 7 and [m.kind for m in last.manifests] == ["ValidatingWebhookConfiguration"]


def test_install_applies_the_webhook_configuration_only_after_the_deployments_wave(out: Path) -> None:
    manifests = load(out)
    steps = install_steps(manifests)
    kinds = [[m.kind for m in step.manifests] for step in steps]
    last_deployments = max(i for i, step in enumerate(kinds) if "Deployment" in step)
    hooks = next(i for i, step in enumerate(kinds) if "ValidatingWebhookConfiguration" in step)
    assert hooks == last_deployments + 1 and kinds[hooks] == ["ValidatingWebhookConfiguration"]
    assert sorted(m.source for s in steps for m in s.manifests) == sorted(m.source for m in manifests)
    assert "wave 4 webhook configurations" in steps[hooks].title


def test_a_webhook_configuration_declared_after_the_deployments_stays_in_its_own_wave(
    out: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    webhook = next(copy.rglob("*validatingwebhookconfiguration.yaml"))
    obj = yaml.safe_load(webhook.read_text())
    obj["metadata"]["annotations"][SYNC_WAVE] = "7"
    webhook.write_text(yaml.safe_dump(obj))
    steps = install_steps(load(copy))
    assert steps[-1].name == "wave 7 webhook configurations"
    assert [m.kind for m in steps[-1].manifests] == ["ValidatingWebhookConfiguration"]


def test_a_webhook_configuration_is_healthy_once_every_service_webhook_has_a_ca_bundle() -> None:
    hook = {"name": "a.example.com", "clientConfig": {"service": {"name": "w", "namespace": "n"}}}
    by_url = {"name": "b.example.com", "clientConfig": {"url": "https://hooks.example.com/"}}
    configuration = {"kind": "ValidatingWebhookConfiguration", "webhooks": [hook, by_url]}
    verdict = health.judge(configuration)
    assert not verdict.ready and verdict.detail == "no caBundle yet for a.example.com"
    hook["clientConfig"]["caBundle"] = "LS0t"  # type: ignore[index]
    assert health.judge(configuration).ready


def test_within_a_wave_namespaces_and_service_accounts_come_before_what_uses_them(out: Path) -> None:
    for wave in waves(load(out)):
        kinds = [m.kind for m in wave.manifests]
        if "Namespace" in kinds:
            assert kinds[0] == "Namespace"
        if "ServiceAccount" in kinds and "Deployment" in kinds:
            assert kinds.index("ServiceAccount") < kinds.index("Deployment")
        if "ClusterRole" in kinds and "ClusterRoleBinding" in kinds:
            assert kinds.index("ClusterRole") < kinds.index("ClusterRoleBinding")


def test_uninstall_removes_webhook_configurations_first_then_the_waves_in_reverse(out: Path) -> None:
    ordered = uninstall_order(load(out))
    assert ordered[0].kind == "ValidatingWebhookConfiguration"
    rest = [m.wave for m in ordered[1:]]
    assert rest == sorted(rest, reverse=True)


@pytest.mark.parametrize("setup,message", [
    (lambda d: None, "no such folder"),
    (lambda d: d.mkdir(), "no kustomization.yaml"),
    (lambda d: (d.mkdir(), (d / "kustomization.yaml").write_text("resources: [missing]\n")),
     "missing does not exist"),
    (lambda d: (d.mkdir(), (d / "kustomization.yaml").write_text("resources: [../x]\n")),
     "outside"),
    (lambda d: (d.mkdir(), (d / "kustomization.yaml").write_text("resources: [a.yaml]\n"),
                (d / "a.yaml").write_text("key: [unclosed\n")), "cannot be read as YAML"),
    (lambda d: (d.mkdir(), (d / "kustomization.yaml").write_text("resources: [a.yaml]\n"),
                (d / "a.yaml").write_text("just: text\n")), "not a Kubernetes object"),
    (lambda d: (d.mkdir(), (d / "kustomization.yaml").write_text("resources: [.]\n")), "a cycle"),
    (lambda d: (d.mkdir(), (d / "b").mkdir(), (d / "kustomization.yaml").write_text("resources: [b]\n"),
                (d / "b" / "kustomization.yaml").write_text("resources: [..]\n")), "a cycle"),
])
def test_output_that_is_not_compiled_output_is_refused_with_what_is_wrong(
    tmp_path: Path, setup: Any, message: str
) -> None:
    folder = tmp_path / "out"
    setup(folder)
    with pytest.raises(OutputError, match=message):
        load(folder)


def _deployment(**status: Any) -> dict[str, Any]:
    return {"kind": "Deployment", "metadata": {"generation": 2}, "spec": {"replicas": 2},
            "status": {"observedGeneration": 2, **status}}


@pytest.mark.parametrize("obj,ready", [
    (_deployment(updatedReplicas=2, availableReplicas=2, readyReplicas=2, replicas=2), True),
    (_deployment(updatedReplicas=2, availableReplicas=1, readyReplicas=1, replicas=2), False),
    (_deployment(updatedReplicas=1, availableReplicas=2, readyReplicas=2, replicas=3), False),
    ({**_deployment(updatedReplicas=2, availableReplicas=2, replicas=2),
      "metadata": {"generation": 3}}, False),
    ({"kind": "CustomResourceDefinition", "status": {"conditions": [
        {"type": "NamesAccepted", "status": "True"}, {"type": "Established", "status": "True"}]}},
     True),
    ({"kind": "CustomResourceDefinition", "status": {"conditions": [
        {"type": "NamesAccepted", "status": "True"}]}}, False),
    ({"kind": "Namespace", "status": {"phase": "Terminating"}}, False),
    ({"kind": "Namespace", "status": {"phase": "Active"}}, True),
    ({"kind": "ConfigMap"}, True),
])
def test_health_is_what_argo_cd_and_kubectl_wait_would_say(obj: dict[str, Any], ready: bool) -> None:
    verdict = health.judge(obj)
    assert verdict.ready is ready
    assert bool(verdict.detail) is not ready


def test_an_apply_that_changed_only_status_reports_unchanged() -> None:
    before = {"metadata": {"name": "a", "resourceVersion": "1"}, "spec": {"x": 1}, "status": {"a": 1}}
    after = {"metadata": {"name": "a", "resourceVersion": "2"}, "spec": {"x": 1}, "status": {"a": 2}}
    assert _action(before, after, dry_run=False) == "unchanged"
    assert _action(before, {**after, "spec": {"x": 2}}, dry_run=False) == "configured"
    assert _action(None, after, dry_run=True) == "would be created"


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_install_on_a_cluster_that_does_not_answer_names_the_server_and_exits_1(
    out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fivespot.cli.main import main

    server = f"https://127.0.0.1:{_closed_port()}"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    assert main(["install", str(out), "--kubeconfig", str(kubeconfig)]) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"error: the API server {server}: did not answer (connection refused)")
    assert "Traceback" not in error and "bug" not in error


def test_install_without_a_kubeconfig_says_which_file_it_looked_for(
    out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fivespot.cli.main import main

    missing = tmp_path / "nowhere" / "kubeconfig"
    assert main(["install", str(out), "--kubeconfig", str(missing)]) == 2
    assert capsys.readouterr().err == (f"error: no kubeconfig: {missing} does not exist (pass "
                                       "--kubeconfig, set KUBECONFIG, or run in a pod)\n")
