"""The workloads emitter runs every component hardened, observable and rolled by its bundle."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from fivespot.api.providers import BuiltinProvider
from fivespot.compiler.emit import workloads
from fivespot.compiler.emit.base import WORKLOADS
from fivespot.compiler.emit.bundle import bundle_json
from fivespot.compiler.loader import load_repo
from fivespot.compiler.repo import Repo, assemble
from fivespot.compiler.spec import CapacityConsumer, CustomProvider, Platform

API = "config.5spot.finos.org/v1alpha1"
NS = "fivespot-test"
IMAGE = "registry.example.com/fivespot:1.2.3"
BUNDLE = "/etc/fivespot/bundle.json"
CERT_MANAGER = {"certificate": {"mode": "cert-manager",
                                "issuerRef": {"kind": "Issuer", "name": "webhook-ca"}}}


def platform(**spec: Any) -> Platform:
    return Platform.model_validate({"apiVersion": API, "kind": "Platform",
                                    "metadata": {"name": "platform"},
                                    "spec": {"namespace": NS, "image": IMAGE, **spec}})


def consumer(name: str, group: str, resource: str, ceiling: int = 10) -> CapacityConsumer:
    return CapacityConsumer.model_validate({
        "apiVersion": API, "kind": "CapacityConsumer", "metadata": {"name": name},
        "spec": {"group": group, "version": "v1", "kind": "Pool", "resource": resource,
                 "capacityPaths": ["spec.replicas"], "maxActiveValue": ceiling}})


CONSUMERS = (consumer("a-pools", "pools.example.com", "pools"),
             consumer("b-warm", "agents.example.com", "warmpools"))
CUSTOM = CustomProvider.model_validate({"kind": "ChangeFreeze", "specSchema": {"type": "object"}})


def make_repo(consumers: tuple[CapacityConsumer, ...] = CONSUMERS,
              builtin: tuple[BuiltinProvider, ...] = tuple(BuiltinProvider),
              custom: tuple[CustomProvider, ...] = (CUSTOM,), **spec: Any) -> Repo:
    return Repo(platform=platform(**spec), consumers=consumers, builtin_providers=builtin,
                custom_providers=custom, tenants=(), fixtures=())


def of_kind(repo: Repo, kind: str) -> dict[str, dict[str, Any]]:
    return {a.name: a.obj for a in workloads.emit(repo) if a.kind == kind}


def deployments(repo: Repo) -> dict[str, dict[str, Any]]:
    return of_kind(repo, "Deployment")


def only_container(deployment: dict[str, Any]) -> dict[str, Any]:
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


COMPONENTS = {"fivespot-audit-controller", "fivespot-capacity-controller",
              "fivespot-provider-capital-markets",
              "fivespot-provider-composite",
              "fivespot-provider-manual", "fivespot-provider-time-based", "fivespot-webhook"}


def test_every_component_gets_a_service_account_deployment_pdb_and_metrics_service() -> None:
    repo = make_repo()
    assert set(deployments(repo)) == COMPONENTS
    assert set(of_kind(repo, "PodDisruptionBudget")) == COMPONENTS
    assert set(of_kind(repo, "Service")) == {f"{c}-metrics" for c in COMPONENTS}
    assert set(of_kind(repo, "ServiceAccount")) == COMPONENTS | {
        "fivespot-custom-provider-changefreezes"}
    assert all(a.layer == WORKLOADS and a.path.startswith("workloads/")
               for a in workloads.emit(repo))


def test_a_repo_without_consumers_has_no_capacity_or_webhook_workload() -> None:
    repo = make_repo(consumers=())
    names = {a.name for a in workloads.emit(repo)}
    assert not {n for n in names if n.startswith(("fivespot-capacity", "fivespot-webhook"))}
    assert set(deployments(repo)) == {"fivespot-provider-capital-markets", "fivespot-provider-composite",
                                      "fivespot-provider-manual", "fivespot-provider-time-based"}


def test_custom_provider_kinds_get_an_identity_but_no_deployment() -> None:
    repo = make_repo()
    account = of_kind(repo, "ServiceAccount")["fivespot-custom-provider-changefreezes"]
    assert account["automountServiceAccountToken"] is True
    assert not [d for d in deployments(repo) if "changefreeze" in d]


@pytest.mark.parametrize("spec", [{}, {"webhook": CERT_MANAGER}])
def test_every_pod_and_container_is_hardened(spec: dict[str, Any]) -> None:
    for name, deployment in deployments(make_repo(**spec)).items():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] == 65532, name
        assert pod["securityContext"]["runAsGroup"] == 65532, name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert pod.get("hostNetwork", False) is False and pod.get("hostPID", False) is False
        for container in pod["containers"] + pod.get("initContainers", []):
            context = container["securityContext"]
            assert context["runAsNonRoot"] is True, name
            assert context["runAsUser"] == 65532 and context["runAsGroup"] == 65532, name
            assert context["readOnlyRootFilesystem"] is True, name
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["privileged"] is False, name
            assert context["capabilities"] == {"drop": ["ALL"]}, name
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}, name
            assert container["image"] == IMAGE and container["imagePullPolicy"] == "IfNotPresent"


def test_every_container_has_resource_requests_and_limits() -> None:
    for name, deployment in deployments(make_repo()).items():
        resources = only_container(deployment)["resources"]
        for bound in ("requests", "limits"):
            assert set(resources[bound]) == {"cpu", "memory"}, name


def test_controllers_probe_health_and_readiness_on_the_metrics_port() -> None:
    for name, deployment in deployments(make_repo()).items():
        if name == "fivespot-webhook":
            continue
        container = only_container(deployment)
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 8080,
                                                         "scheme": "HTTP"}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 8080,
                                                          "scheme": "HTTP"}
        assert container["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}]


def test_the_webhook_probes_its_own_tls_port_and_exposes_metrics_separately() -> None:
    container = only_container(deployments(make_repo())["fivespot-webhook"])
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 8443,
                                                     "scheme": "HTTPS"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 8443,
                                                      "scheme": "HTTPS"}
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"https": 8443,
                                                                           "metrics": 8080}


def test_the_webhook_keeps_serving_while_its_deleted_pod_leaves_the_endpoints() -> None:
    """A preStop sleep before SIGTERM: without it a rollout can cut a request the API server has
    just sent to the old pod (an EOF, a refused write). Controllers serve no admission: none."""
    for name, deployment in deployments(make_repo()).items():
        container = only_container(deployment)
        if name == "fivespot-webhook":
            assert container["lifecycle"] == {"preStop": {"sleep": {"seconds": 5}}}
            grace = deployment["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
            assert grace > 5 + 10, "the sleep and gunicorn's graceful timeout fit in the grace period"
        else:
            assert "lifecycle" not in container


def test_each_component_runs_its_own_subcommand_with_the_mounted_bundle() -> None:
    args = {name: only_container(d)["args"] for name, d in deployments(make_repo()).items()}
    assert args == {
        "fivespot-capacity-controller": ["controller", "capacity", "--bundle", BUNDLE],
        "fivespot-audit-controller": ["controller", "audit", "--bundle", BUNDLE],
        "fivespot-provider-manual": ["provider", "manual", "--bundle", BUNDLE],
        "fivespot-provider-time-based": ["provider", "time-based", "--bundle", BUNDLE],
        "fivespot-provider-capital-markets": ["provider", "capital-markets", "--bundle", BUNDLE],
        "fivespot-provider-composite": ["provider", "composite", "--bundle", BUNDLE],
        "fivespot-webhook": ["webhook", "serve", "--bundle", BUNDLE, "--port", "8443"],
    }
    assert all("command" not in only_container(d) for d in deployments(make_repo()).values())


def test_the_bundle_is_mounted_read_only_and_tmp_is_the_only_writable_path() -> None:
    for name, deployment in deployments(make_repo()).items():
        pod = deployment["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m for m in only_container(deployment)["volumeMounts"]}
        assert set(mounts) == {"/etc/fivespot", "/tmp"}, name
        assert mounts["/etc/fivespot"]["readOnly"] is True
        assert volumes[mounts["/etc/fivespot"]["name"]]["configMap"]["name"] == "fivespot-bundle"
        assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
        assert mounts["/tmp"].get("readOnly", False) is False


def test_in_cert_manager_mode_the_webhook_reads_its_certificate_from_the_mounted_secret() -> None:
    container = only_container(deployments(make_repo(webhook=CERT_MANAGER))["fivespot-webhook"])
    tls = next(m for m in container["volumeMounts"] if m["name"] == "tls")
    assert tls["readOnly"] is True
    assert container["args"][-2:] == ["--cert-dir", tls["mountPath"]]
    pod = deployments(make_repo(webhook=CERT_MANAGER))["fivespot-webhook"]["spec"]["template"]
    secret = next(v for v in pod["spec"]["volumes"] if v["name"] == "tls")["secret"]
    assert secret["secretName"] == "fivespot-webhook-tls"
    self_managed = only_container(deployments(make_repo())["fivespot-webhook"])
    assert "--cert-dir" not in self_managed["args"]


def test_pods_learn_their_name_and_namespace_from_the_downward_api() -> None:
    for deployment in deployments(make_repo()).values():
        env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
               for e in only_container(deployment)["env"]}
        assert env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}


def test_replicas_follow_the_platform() -> None:
    repo = make_repo(controllerReplicas=3, webhook={"replicas": 4})
    replicas = {name: d["spec"]["replicas"] for name, d in deployments(repo).items()}
    assert replicas.pop("fivespot-webhook") == 4
    assert set(replicas.values()) == {3}


def test_pods_spread_across_nodes() -> None:
    for name, deployment in deployments(make_repo()).items():
        template = deployment["spec"]["template"]
        [spread] = template["spec"]["topologySpreadConstraints"]
        assert spread["topologyKey"] == "kubernetes.io/hostname"
        assert spread["labelSelector"]["matchLabels"].items() <= template["metadata"]["labels"].items()


def test_the_pod_template_carries_the_bundle_checksum_so_a_new_bundle_rolls_the_pods() -> None:
    repo = make_repo()
    expected = hashlib.sha256(bundle_json(repo).encode()).hexdigest()
    changed = make_repo(consumers=(consumer("a-pools", "pools.example.com", "pools", ceiling=11),
                                   CONSUMERS[1]))
    for name, deployment in deployments(repo).items():
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        assert annotations == {"5spot.finos.org/bundle-sha256": expected}
        assert deployments(changed)[name]["spec"]["template"]["metadata"]["annotations"] != annotations


def test_selectors_pdbs_and_metrics_services_all_pick_exactly_the_components_pods() -> None:
    repo = make_repo()
    budgets, services = of_kind(repo, "PodDisruptionBudget"), of_kind(repo, "Service")
    for name, deployment in deployments(repo).items():
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert selector.items() <= labels.items() and selector["app.kubernetes.io/name"] == name
        assert budgets[name]["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": selector}}
        service = services[f"{name}-metrics"]["spec"]
        assert service["selector"] == selector
        assert service["ports"] == [{"name": "metrics", "port": 8080, "targetPort": "metrics",
                                     "protocol": "TCP"}]
        assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == name


def test_every_service_account_mounts_its_token_because_every_component_calls_the_api() -> None:
    repo = make_repo()
    for account in of_kind(repo, "ServiceAccount").values():
        assert account["automountServiceAccountToken"] is True
        assert account["metadata"]["namespace"] == NS


def _write_config(folder: Path, consumer_files: dict[str, list[str]]) -> Repo:
    """A config repo on disk: the Platform plus consumers split over files as given."""
    folder.mkdir()
    (folder / "platform.yaml").write_text(yaml.safe_dump(
        platform().model_dump(mode="json", by_alias=True, exclude_defaults=True)))
    for file, names in consumer_files.items():
        documents = [next(c for c in CONSUMERS if c.metadata.name == name) for name in names]
        (folder / file).write_text(yaml.safe_dump_all(
            [c.model_dump(mode="json", by_alias=True, exclude_defaults=True) for c in documents]))
    return assemble(load_repo(folder))


def test_output_is_deterministic_whatever_order_consumers_are_written_in(tmp_path: Path) -> None:
    one = _write_config(tmp_path / "one", {"consumers.yaml": ["a-pools", "b-warm"]})
    other = _write_config(tmp_path / "other", {"a.yaml": ["b-warm"], "b.yaml": ["a-pools"]})
    assert workloads.emit(one) == workloads.emit(one)
    assert workloads.emit(one) == workloads.emit(other)
    assert set(deployments(one)) == {"fivespot-capacity-controller", "fivespot-audit-controller",
                                     "fivespot-webhook"}
