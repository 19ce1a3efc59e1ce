"""The GitOps layout: waves, deletion safety, tenant namespaces, the Argo CD Application, AppProject
and health ConfigMap, the Flux source / entry / layer chain, and the compile warnings."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from fivespot.compiler.compile_warnings import compile_warnings
from fivespot.compiler.diagnostics import CompileError
from fivespot.compiler.emit import gitops, health
from fivespot.compiler.emit.base import LAYERS, SYNC_WAVES, WEBHOOK_CONFIG, WORKLOADS
from fivespot.compiler.output import read_tree, write_tree
from fivespot.compiler.pipeline import Compiled, compile_repo
from fivespot.policies.cel.engine import compile_expression

pytestmark = pytest.mark.unit

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent-sandbox" / "config"


def compile_with(tmp_path: Path, **changes: Any) -> Compiled:
    """The example with `changes` merged into its Platform spec (None deletes a key)."""
    config = tmp_path / "config"
    if not config.exists():
        shutil.copytree(EXAMPLE, config)
    platform = yaml.safe_load((config / "platform.yaml").read_text())

    def merge(into: dict[str, Any], update: dict[str, Any]) -> None:
        for key, value in update.items():
            if value is None:
                into.pop(key, None)
            elif isinstance(value, dict) and isinstance(into.get(key), dict):
                merge(into[key], value)
            else:
                into[key] = value

    merge(platform["spec"], changes)
    (config / "platform.yaml").write_text(yaml.safe_dump(platform))
    return compile_repo(config)


def load(compiled: Compiled, path: str) -> dict[str, Any]:
    document = yaml.safe_load(compiled.files[path])
    assert isinstance(document, dict)
    return document


@pytest.fixture(scope="module")
def example() -> Compiled:
    return compile_repo(EXAMPLE)


# --- waves ---------------------------------------------------------------------------------------


def test_every_object_carries_the_wave_of_its_layer(example: Compiled) -> None:
    for artifact in example.artifacts:
        assert artifact.obj["metadata"]["annotations"][gitops.SYNC_WAVE] == SYNC_WAVES[artifact.layer]
    assert [int(SYNC_WAVES[layer]) for layer in LAYERS] == list(range(len(LAYERS)))


def test_the_webhook_configuration_is_alone_in_a_wave_after_the_webhook_deployment(example: Compiled) -> None:
    by_kind = {(a.kind, a.name): a for a in example.artifacts}
    configuration = by_kind[("ValidatingWebhookConfiguration", "fivespot-webhook")]
    deployment = by_kind[("Deployment", "fivespot-webhook")]
    assert (configuration.layer, deployment.layer) == (WEBHOOK_CONFIG, WORKLOADS)
    assert int(SYNC_WAVES[configuration.layer]) == int(SYNC_WAVES[deployment.layer]) + 1
    assert [a.kind for a in example.artifacts if a.layer == WEBHOOK_CONFIG] == ["ValidatingWebhookConfiguration"]


def test_waves_lists_every_layer_in_order_and_the_flux_root_lists_only_flux(example: Compiled) -> None:
    waves = load(example, "waves/kustomization.yaml")["resources"]
    layers = gitops.present_layers(list(example.artifacts))
    assert [layer for layer in LAYERS if layer in layers] == layers and len(layers) >= 6
    assert waves == [f"../{layer}" for layer in layers]
    assert load(example, "kustomization.yaml")["resources"] == ["flux"]


def test_without_flux_the_root_lists_the_layers_in_order(tmp_path: Path) -> None:
    compiled = compile_with(tmp_path, gitops={"flux": None})
    assert load(compiled, "kustomization.yaml")["resources"] == gitops.present_layers(list(compiled.artifacts))
    assert not [path for path in compiled.files if path.startswith("flux/")]


# --- deletion safety -----------------------------------------------------------------------------


def test_crds_and_namespaces_are_never_pruned_or_deleted_and_nothing_else_is_held(example: Compiled) -> None:
    """...but the controllers' tenant RoleBindings, which are not pruned (and are deleted with
    the Application)."""
    protected = unpruned = 0
    for artifact in example.artifacts:
        annotations = artifact.obj["metadata"]["annotations"]
        options = annotations.get(gitops.SYNC_OPTIONS, "").split(",")
        if artifact.kind in ("CustomResourceDefinition", "Namespace"):
            protected += 1
            assert {"Prune=false", "Delete=false"} <= set(options), artifact.path
            assert annotations[gitops.FLUX_PRUNE] == "disabled", artifact.path
        elif artifact.kind == "RoleBinding" and artifact.name.endswith("-tenants"):
            unpruned += 1
            assert options == ["Prune=false"], artifact.path
            assert annotations[gitops.FLUX_PRUNE] == "disabled", artifact.path
        else:
            assert "Prune=false" not in options and gitops.FLUX_PRUNE not in annotations, artifact.path
    assert protected >= 9  # six CRDs, the install namespace and the two tenant namespaces
    assert unpruned == 4  # capacity and audit, in agents and agents-gpu


def test_tenant_namespaces_the_output_writes_into_are_created_in_the_rbac_wave(example: Compiled) -> None:
    namespaces = {a.name: a for a in example.artifacts if a.kind == "Namespace"}
    assert set(namespaces) == {"5spot-system", "agents", "agents-gpu"}
    assert namespaces["agents"].layer == "rbac"
    assert namespaces["agents"].path == "rbac/namespaces/agents.namespace.yaml"
    written = {a.obj["metadata"]["namespace"] for a in example.artifacts
               if a.layer == "schedules" or a.kind == "RoleBinding"}
    assert written <= set(namespaces)


# --- Argo CD -------------------------------------------------------------------------------------


def test_the_application_syncs_the_waves_with_server_side_diff_and_apply(example: Compiled) -> None:
    application = load(example, "argocd/application.yaml")
    assert application["spec"]["source"]["path"] == "clusters/prod/fivespot/waves"
    assert application["metadata"]["annotations"][gitops.COMPARE_OPTIONS] == "ServerSideDiff=true"
    assert "ServerSideApply=true" in application["spec"]["syncPolicy"]["syncOptions"]
    assert application["spec"]["project"] == "platform"


def test_the_app_project_allows_exactly_the_repository_namespaces_and_kinds_of_the_output(
        example: Compiled) -> None:
    project = load(example, "argocd/appproject.yaml")["spec"]
    assert project["sourceRepos"] == ["https://git.example.com/platform/cluster-config.git"]
    assert {d["namespace"] for d in project["destinations"]} == {"5spot-system", "agents",
                                                                 "agents-gpu"}
    namespaced = {(a.obj["apiVersion"].rpartition("/")[0], a.kind) for a in example.artifacts
                  if "namespace" in a.obj["metadata"]}
    cluster = {(a.obj["apiVersion"].rpartition("/")[0], a.kind) for a in example.artifacts
               if "namespace" not in a.obj["metadata"]}
    assert {(e["group"], e["kind"]) for e in project["namespaceResourceWhitelist"]} == namespaced
    assert {(e["group"], e["kind"]) for e in project["clusterResourceWhitelist"]} == cluster
    # The one Secret is the webhook's TLS Secret, compiled empty so the webhook needs no
    # `create` on Secrets (a repository writer already controls the Deployments in that namespace).
    assert [(a.obj["metadata"]["namespace"], a.name) for a in example.artifacts
            if a.kind == "Secret"] == [("5spot-system", "fivespot-webhook-tls")]


def test_the_default_project_gets_no_app_project_and_a_warning(tmp_path: Path) -> None:
    compiled = compile_with(tmp_path, gitops={"argocd": {"project": "default"}})
    assert "argocd/appproject.yaml" not in compiled.files
    warnings = compile_warnings(compiled.repo, tmp_path / "out", {}, compiled.files)
    assert [w.field for w in warnings] == ["spec.gitops.argocd.project"]
    assert str(warnings[0]).startswith("platform.yaml:1:1: spec.gitops.argocd.project: ")


def test_argocd_cm_has_a_health_check_for_every_fivespot_kind_with_a_status_and_the_webhook_configuration(
        example: Compiled) -> None:
    config_map = load(example, "argocd/argocd-cm.health.yaml")
    assert config_map["metadata"]["name"] == "argocd-cm"
    assert config_map["metadata"]["labels"]["app.kubernetes.io/part-of"] == "argocd"
    kinds = {(a.obj["spec"]["group"], a.obj["spec"]["names"]["kind"])
             for a in example.artifacts if a.kind == "CustomResourceDefinition"
             and "status" in (a.obj["spec"]["versions"][0].get("subresources") or {})}
    expected = {health.health_key(g, k) for g, k in kinds} | {
        "resource.customizations.health.admissionregistration.k8s.io_ValidatingWebhookConfiguration"}
    health_keys = {k for k in config_map["data"] if k.startswith(health.HEALTH_KEY_PREFIX)}
    assert health_keys == expected
    assert "resource.customizations.health.5spot.finos.org_ScheduledCapacity" in expected
    assert all(value == health.KSTATUS_LUA for key, value in config_map["data"].items()
               if key in health_keys and "ValidatingWebhookConfiguration" not in key)


def test_argocd_cm_leaves_what_the_capacity_controller_owns_out_of_every_applications_diff(
        example: Compiled) -> None:
    config_map = load(example, "argocd/argocd-cm.health.yaml")
    others = {k: v for k, v in config_map["data"].items()
              if not k.startswith(health.HEALTH_KEY_PREFIX)}
    assert others == {"resource.customizations.ignoreDifferences.all":
                      "managedFieldsManagers:\n- fivespot-capacity-controller\n",
                      "resource.customizations.ignoreDifferences.pools.agents.example.com_VirtualMachinePool":
                      "jqPathExpressions:\n- '.spec | select(. == null)'\n"}


def test_each_parent_of_a_gated_field_is_ignored_when_null_deepest_first() -> None:
    # Argo CD's managedFieldsManagers normalization leaves a parent holding nothing but the gated
    # field null; these expressions delete it from both sides of the diff
    assert gitops.null_parents(["spec.replicas"]) == [".spec | select(. == null)"]
    assert gitops.null_parents(["spec.scaling.warm", "spec.scaling.cold", "spec.size"]) == [
        ".spec.scaling | select(. == null)", ".spec | select(. == null)"]


def test_a_kind_that_never_gets_a_status_has_no_health_check_so_argo_cd_does_not_wait_on_it(
        example: Compiled) -> None:
    """TenantCapacityLimit (the admission policies' params) has no status subresource and no
    controller: with the kstatus Lua it was Progressing forever and real Argo CD's sync never
    got past wave 2. Without a key Argo CD gives it no health, as it does a ConfigMap."""
    limits = [a for a in example.artifacts if a.kind == "CustomResourceDefinition"
              and a.obj["spec"]["names"]["kind"] == "TenantCapacityLimit"]
    assert limits and "subresources" not in limits[0].obj["spec"]["versions"][0]
    data = load(example, "argocd/argocd-cm.health.yaml")["data"]
    assert health.health_key("policy.5spot.finos.org", "TenantCapacityLimit") not in data
    assert not [key for key in data if key.endswith("_TenantCapacityLimit")]


def test_argocd_cm_says_in_its_comment_to_apply_it_under_fivespots_own_field_manager(
        example: Compiled) -> None:
    text = example.files["argocd/argocd-cm.health.yaml"].decode()
    comment = [line for line in text.splitlines() if line.startswith("#")]
    assert text.startswith("# ") and f"# Apply from the output folder: {gitops.ARGOCD_CM_APPLY}" in comment
    assert "--field-manager=fivespot-argocd-health" in gitops.ARGOCD_CM_APPLY
    assert yaml.safe_load(text)["kind"] == "ConfigMap"


def test_argocd_cmd_params_cm_sets_a_fixed_five_second_self_heal_timeout_and_no_backoff(
        example: Compiled) -> None:
    # Argo CD v3.6 builds no backoff when its initial timeout is 0 and then waits the fixed
    # timeout after the last operation; with the backoff, the first self-heal waits for nothing
    config_map = load(example, "argocd/argocd-cmd-params-cm.yaml")
    assert config_map["metadata"] == {
        "name": "argocd-cmd-params-cm", "namespace": "argocd",
        "labels": {"app.kubernetes.io/name": "argocd-cmd-params-cm", "app.kubernetes.io/part-of": "argocd"}}
    assert config_map["data"] == {"controller.self.heal.timeout.seconds": "5",
                                  "controller.self.heal.backoff.timeout.seconds": "0"}


def test_argocd_cmd_params_cm_says_to_apply_it_under_fivespots_own_manager_and_restart_the_controller(
        example: Compiled) -> None:
    text = example.files["argocd/argocd-cmd-params-cm.yaml"].decode()
    comment = [line for line in text.splitlines() if line.startswith("#")]
    assert f"# Apply from the output folder: {gitops.ARGOCD_CMD_PARAMS_APPLY}" in comment
    assert "--field-manager=fivespot-argocd-health -f argocd/argocd-cmd-params-cm.yaml" in gitops.ARGOCD_CMD_PARAMS_APPLY
    assert "#   kubectl -n argocd rollout restart statefulset argocd-application-controller" in comment
    readme = example.files["README.md"].decode()
    assert gitops.ARGOCD_CMD_PARAMS_APPLY in readme
    assert "kubectl -n argocd rollout restart statefulset argocd-application-controller" in readme


def test_the_restart_names_the_namespace_argo_cd_runs_in(tmp_path: Path) -> None:
    compiled = compile_with(tmp_path, gitops={"argocd": {"namespace": "gitops"}})
    assert load(compiled, "argocd/argocd-cmd-params-cm.yaml")["metadata"]["namespace"] == "gitops"
    text = compiled.files["argocd/argocd-cmd-params-cm.yaml"].decode()
    assert "#   kubectl -n gitops rollout restart statefulset argocd-application-controller" in text


def test_fixed_self_heal_timeout_false_leaves_argocd_cmd_params_cm_out(tmp_path: Path) -> None:
    compiled = compile_with(tmp_path, gitops={"argocd": {"fixedSelfHealTimeout": False}})
    assert "argocd/argocd-cmd-params-cm.yaml" not in compiled.files
    assert "argocd/argocd-cm.health.yaml" in compiled.files
    assert "argocd-cmd-params-cm" not in compiled.files["README.md"].decode()


def test_without_argo_cd_there_are_no_self_heal_keys(tmp_path: Path) -> None:
    compiled = compile_with(tmp_path, gitops={"argocd": None})
    assert not [path for path in compiled.files if path.startswith("argocd/")]
    assert "argocd-cmd-params-cm" not in compiled.files["README.md"].decode()


def test_the_platform_docs_give_the_self_heal_keys_and_the_exact_apply_and_restart_commands(
        example: Compiled) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "operations" / "gitops.md").read_text()
    blocks = [textwrap.dedent(b) for b in re.findall(r"```(?:yaml|sh)\n(.*?)```", page, re.S)]
    shown = [yaml.safe_load(b) for b in blocks if "controller.self.heal" in b]
    assert shown == [load(example, "argocd/argocd-cmd-params-cm.yaml")["data"]]
    commands = [b.strip() for b in blocks if gitops.ARGOCD_CMD_PARAMS_APPLY in b]
    assert commands == [f"{gitops.ARGOCD_CMD_PARAMS_APPLY}\n{gitops.argocd_controller_restart('argocd')}"]


# --- Flux ----------------------------------------------------------------------------------------


def test_the_flux_entry_applies_only_the_layer_chain_and_each_layer_waits_on_the_one_before(
        example: Compiled) -> None:
    assert load(example, "flux/kustomization.yaml")["resources"] == ["fivespot.yaml"]
    entry = load(example, "flux/fivespot.yaml")["spec"]
    assert entry["path"] == "clusters/prod/fivespot/flux/layers"
    assert entry["wait"] is True
    layers = gitops.present_layers(list(example.artifacts))
    names = [f"fivespot-{layer}" for layer in layers]
    assert load(example, "flux/layers/kustomization.yaml")["resources"] == sorted(f"{n}.yaml" for n in names)
    previous = None
    for layer, name in zip(layers, names):
        spec = load(example, f"flux/layers/{name}.yaml")["spec"]
        assert spec["path"] == f"clusters/prod/fivespot/{layer}"
        assert spec["wait"] is True and spec["prune"] is True
        assert spec.get("dependsOn") == ([{"name": previous}] if previous else None)
        previous = name
    webhook_layer = load(example, "flux/layers/fivespot-webhook.yaml")["spec"]
    assert webhook_layer["healthCheckExprs"][0]["kind"] == "ValidatingWebhookConfiguration"


def test_a_flux_url_emits_the_git_repository_beside_the_entry(tmp_path: Path) -> None:
    compiled = compile_with(tmp_path, gitops={"flux": {"url": "https://git.example.com/cfg.git",
                                                       "ref": "release"}})
    source = load(compiled, "flux/gitrepository.yaml")
    assert (source["kind"], source["metadata"]["name"], source["metadata"]["namespace"]) == \
        ("GitRepository", "cluster-config", "flux-system")
    assert source["spec"]["ref"] == {"branch": "release"}
    assert load(compiled, "flux/kustomization.yaml")["resources"] == ["fivespot.yaml", "gitrepository.yaml"]


@pytest.mark.parametrize("kind,url,words", [
    ("Bucket", "https://s3.example.com/x", "a Bucket source cannot be emitted"),
    ("GitRepository", "oci://ghcr.io/x/y", "does not fit sourceRef.kind GitRepository"),
])
def test_a_flux_url_that_cannot_be_emitted_is_an_error_naming_the_field(
        tmp_path: Path, kind: str, url: str, words: str) -> None:
    with pytest.raises(CompileError) as raised:
        compile_with(tmp_path, gitops={"flux": {"url": url, "sourceRef": {"kind": kind}}})
    assert words in str(raised.value) and "platform.yaml:" in str(raised.value)


def _configuration(*bundles: str | None) -> dict[str, Any]:
    hooks = []
    for index, bundle in enumerate(bundles):
        config: dict[str, Any] = {"service": {"name": "fivespot-webhook"}}
        if bundle is not None:
            config["caBundle"] = bundle
        hooks.append({"name": f"h{index}.example.com", "clientConfig": config})
    return {"webhooks": hooks}


@pytest.mark.parametrize("bundles,current", [
    ((None, None), False), (("", "Y2E="), False), (("Y2E=", None), False), (("Y2E=", "Y2E="), True),
])
def test_the_flux_webhook_health_is_current_only_when_every_webhook_has_a_ca_bundle(
        bundles: tuple[str | None, ...], current: bool) -> None:
    state = _configuration(*bundles)
    for expr, expected in ((health.WEBHOOK_CONFIGURATION_CURRENT, current),
                           (health.WEBHOOK_CONFIGURATION_IN_PROGRESS, not current)):
        assert compile_expression(expr, ["webhooks"]).evaluate({"webhooks": state["webhooks"]}) is expected


# --- warnings ------------------------------------------------------------------------------------


def test_an_unset_allowed_sources_warns_that_admission_will_be_refused(tmp_path: Path) -> None:
    compiled = compile_with(tmp_path, webhook={"networkPolicy": {"allowedSources": []}})
    [warning] = [w for w in compile_warnings(compiled.repo, tmp_path / "out", {}, compiled.files)]
    assert warning.field == "spec.webhook.networkPolicy.allowedSources"
    assert "will be refused (failurePolicy Fail) until you name the API server's addresses" in warning.message
    ignoring = compile_with(tmp_path, webhook={"failurePolicy": "Ignore"})
    [skipped] = compile_warnings(ignoring.repo, tmp_path / "out", {}, ignoring.files)
    assert "checks will be skipped (failurePolicy Ignore) and every capacity write the target " \
        "guard vets refused (the guard always fails closed)" in skipped.message


def test_the_example_compiles_without_warnings(example: Compiled, tmp_path: Path) -> None:
    assert compile_warnings(example.repo, tmp_path, {}, example.files) == []


def test_a_crd_that_leaves_the_output_is_a_warning_naming_the_kind(tmp_path: Path) -> None:
    before = compile_with(tmp_path)
    out = tmp_path / "out"
    write_tree(before.files, out)
    after = compile_with(tmp_path, installScheduledMachineCrd=False)
    warnings = compile_warnings(after.repo, out, read_tree(out), after.files)
    assert len(warnings) == 1
    assert "no longer has the CRD scheduledmachines.5spot.finos.org (kind ScheduledMachine)" in warnings[0].message
    assert str(warnings[0]).startswith(f"{out / 'crds' / 'scheduledmachines.5spot.finos.org.yaml'}:1:1:")
    assert compile_warnings(after.repo, out, after.files, after.files) == []


def test_a_namespace_that_leaves_every_tenant_policy_is_a_warning_naming_its_kept_role_bindings(
        tmp_path: Path) -> None:
    before = compile_with(tmp_path)
    out = tmp_path / "out"
    write_tree(before.files, out)
    tenants = tmp_path / "config" / "tenants.yaml"
    kept = [d for d in yaml.safe_load_all(tenants.read_text()) if d["metadata"]["name"] != "agents-gpu"]
    tenants.write_text(yaml.safe_dump_all(kept))
    after = compile_repo(tmp_path / "config")
    [warning] = compile_warnings(after.repo, out, read_tree(out), after.files)
    assert str(warning).startswith(
        f"{out}/rbac/agents-gpu/fivespot-audit-controller-tenants.rolebinding.yaml:1:1: namespace "
        "agents-gpu is no longer in any TenantPolicy. Its RoleBindings fivespot-audit-controller-"
        "tenants, fivespot-capacity-controller-tenants stay in the cluster")
    assert warning.message.endswith("`kubectl -n agents-gpu delete rolebinding "
                                    "fivespot-audit-controller-tenants "
                                    "fivespot-capacity-controller-tenants`")


def test_the_platform_docs_show_the_ignore_differences_keys_the_example_compiles_to(
        example: Compiled) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "operations" / "gitops.md").read_text()
    blocks = [textwrap.dedent(b) for b in re.findall(r"```yaml\n(.*?)```", page, re.S)]
    shown = [yaml.safe_load(b) for b in blocks if gitops.IGNORE_DIFFERENCES_ALL in b]
    config_map = load(example, "argocd/argocd-cm.health.yaml")
    compiled = {k: v for k, v in config_map["data"].items()
                if k.startswith(gitops.IGNORE_DIFFERENCES_PREFIX)}
    assert shown == [compiled]
