"""The compiled example installs cleanly on a real API server, as Argo CD or Flux would apply it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from fivespot.compiler.emit.base import SCHEDULES
from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import Compiled, compile_repo
from fivespot.devcluster import localrun
from fivespot.devcluster.kubectl import install, kubectl

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent-sandbox"


@pytest.fixture(scope="module", autouse=True)
def no_webhook_configuration_left(kubeconfig: Path) -> Iterator[None]:
    """The installs here apply the compiled webhook configuration, which calls a Service a local
    API server has not got (failurePolicy Fail): it goes with the module, so that a later
    module's ScheduledCapacity writes are not refused by it."""
    yield
    localrun.remove_webhook_configuration(kubeconfig)


def _create_tenant_namespaces(kubeconfig: Path, compiled: Compiled) -> None:
    """The schedules layer writes into tenant namespaces, which the platform does not own; on a
    real cluster they exist before it syncs, so create them as tenant onboarding would."""
    namespaces = sorted({a.obj["metadata"]["namespace"] for a in compiled.artifacts
                         if a.layer == SCHEDULES})
    documents = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                 for n in namespaces]
    if documents:
        kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(documents))


def test_whole_example_applies_server_side_and_every_crd_is_established(
    kubeconfig: Path, admin: client.ApiClient, tmp_path: Path
) -> None:
    compiled = compile_repo(EXAMPLE / "config")
    out = tmp_path / "out"
    write_tree(compiled.files, out)
    _create_tenant_namespaces(kubeconfig, compiled)
    install(kubeconfig, out, [EXAMPLE / "consumer" / "virtualmachinepools.yaml"])

    extensions = client.ApiextensionsV1Api(admin)
    for artifact in compiled.artifacts:
        if artifact.kind == "CustomResourceDefinition":
            crd = extensions.read_custom_resource_definition(artifact.name)
            established = {c.type: c.status for c in crd.status.conditions}
            assert established.get("Established") == "True", artifact.name
            assert established.get("NamesAccepted") == "True", artifact.name

    applied = json.loads(kubectl(kubeconfig, "get", "-A", "-o", "json",
                                 "-l", "app.kubernetes.io/part-of=fivespot",
                                 "deployments,serviceaccounts,configmaps,validatingadmissionpolicies,"
                                 "validatingadmissionpolicybindings,clusterroles,roles,"
                                 "capitalmarketsschedules"))
    names = {(i["kind"], i["metadata"]["name"]) for i in applied["items"]}
    expected = {(a.kind, a.name) for a in compiled.artifacts
                if a.kind in {"Deployment", "ServiceAccount", "ConfigMap", "ValidatingAdmissionPolicy",
                              "ValidatingAdmissionPolicyBinding", "ClusterRole", "Role",
                              "CapitalMarketsSchedule"}}
    assert expected <= names


def test_every_compiled_policy_type_checks_without_warnings(
    kubeconfig: Path, admin: client.ApiClient, tmp_path: Path
) -> None:
    compiled = compile_repo(EXAMPLE / "config")
    out = tmp_path / "out"
    write_tree(compiled.files, out)
    _create_tenant_namespaces(kubeconfig, compiled)
    install(kubeconfig, out, [EXAMPLE / "consumer" / "virtualmachinepools.yaml"])
    policies = [a.name for a in compiled.artifacts if a.kind == "ValidatingAdmissionPolicy"]
    assert policies
    assert_type_checked(admin, policies)


def assert_type_checked(admin: client.ApiClient, names: list[str]) -> None:
    """kube-controller-manager type-checked each policy, without a warning."""
    registration = client.AdmissionregistrationV1Api(admin)
    pending = set(names)
    deadline = time.monotonic() + 60
    while pending and time.monotonic() < deadline:
        for name in sorted(pending):
            policy = registration.read_validating_admission_policy(name)
            status = policy.status
            if status and status.observed_generation == policy.metadata.generation and \
                    status.type_checking is not None:
                warnings = status.type_checking.expression_warnings or []
                assert not warnings, f"{name}: {[(w.field_ref, w.warning) for w in warnings]}"
                pending.discard(name)
        time.sleep(0.2)
    assert not pending, f"kube-controller-manager never type-checked {sorted(pending)}"


def test_kustomize_renders_exactly_the_compiled_objects_from_waves(tmp_path: Path) -> None:
    compiled = compile_repo(EXAMPLE / "config")
    write_tree(compiled.files, tmp_path / "out")
    rendered = [d for d in yaml.safe_load_all(
        kubectl(Path("/dev/null"), "kustomize", str(tmp_path / "out" / "waves"))) if d]
    assert sorted((d["kind"], d["metadata"]["name"]) for d in rendered) == \
        sorted((a.kind, a.name) for a in compiled.artifacts)


def test_the_flux_root_renders_only_the_source_and_entry_kustomization(tmp_path: Path) -> None:
    """A parent Flux Kustomization reaching the output applies the chain, never the layers."""
    compiled = compile_repo(EXAMPLE / "config")
    write_tree(compiled.files, tmp_path / "out")
    rendered = [d for d in yaml.safe_load_all(kubectl(Path("/dev/null"), "kustomize", str(tmp_path / "out")))
                if d]
    assert [(d["kind"], d["metadata"]["name"]) for d in rendered] == [("Kustomization", "fivespot")]


def test_the_tenant_namespace_comes_with_the_output(
    kubeconfig: Path, admin: client.ApiClient, tmp_path: Path
) -> None:
    compiled = compile_repo(EXAMPLE / "config")
    out = tmp_path / "out"
    write_tree(compiled.files, out)
    install(kubeconfig, out, [EXAMPLE / "consumer" / "virtualmachinepools.yaml"])
    namespace = client.CoreV1Api(admin).read_namespace("agents")
    assert namespace.metadata.annotations["kustomize.toolkit.fluxcd.io/prune"] == "disabled"
