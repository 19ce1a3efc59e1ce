"""The webhook's pure decisions: host governance, the governed-target diff guard, the VAP
polyfill, and what an AdmissionReview must look like to be decided at all."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from fivespot.api.bundle import BundleError
from fivespot.api.bundle import parse_bundle as parse_api_bundle
from fivespot.policies.admission_eval import PolicySet
from fivespot.policies.admission_eval import review as evaluate
from fivespot.webhook.bundle import WebhookBundle, prepare
from fivespot.webhook.review import (
    HOST_GOVERNANCE,
    TARGET_GUARD,
    VAP_POLYFILL,
    Lookups,
    Rejected,
    changed_paths,
    parse_review,
    review,
    review_host_governance,
    review_polyfill,
    review_target_guard,
)

GOLDEN_BUNDLE = Path(__file__).parent / "golden" / "agent-sandbox" / "bundle.json"
CAPACITY = "system:serviceaccount:5spot-system:fivespot-capacity-controller"


def bundle_data(**webhook: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(GOLDEN_BUNDLE.read_text())
    data["webhook"].update(webhook)
    return data


def parse_webhook_bundle(data: Any) -> WebhookBundle:
    return prepare(parse_api_bundle(data))


@pytest.fixture(scope="module")
def bundle() -> WebhookBundle:
    return parse_webhook_bundle(bundle_data(polyfill=True))


def scap(name: str = "cap", namespace: str = "agents", node: str | None = "worker-3",
         **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                     "kind": "ManualSchedule", "name": "window"},
        "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                      "kind": "VirtualMachinePool", "name": "sandboxes"},
        "capacity": {"path": "spec.warmReplicas", "activeValue": 4},
        **spec,
    }
    if node is not None:
        body["nodeName"] = node
    return {"apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
            "metadata": {"name": name, "namespace": namespace}, "spec": body}


def request(obj: dict[str, Any] | None, *, operation: str = "CREATE", old: dict[str, Any] | None = None,
            user: str = "alice", group: str = "5spot.finos.org", resource: str = "scheduledcapacities",
            namespace: str = "agents", sub: str = "") -> dict[str, Any]:
    return {
        "uid": "uid-1", "operation": operation, "namespace": namespace,
        "name": (obj or old or {}).get("metadata", {}).get("name", ""),
        "kind": {"group": group, "version": "v1alpha1", "kind": "X"},
        "resource": {"group": group, "version": "v1alpha1", "resource": resource},
        "subResource": sub, "userInfo": {"username": user, "groups": ["system:authenticated"]},
        "object": obj, "oldObject": old, "dryRun": False,
    }


def machine(name: str, node: str, namespace: str = "agents") -> dict[str, Any]:
    return {"apiVersion": "5spot.finos.org/v1beta1", "kind": "ScheduledMachine",
            "metadata": {"name": name, "namespace": namespace},
            "status": {"nodeRef": {"name": node}}}


MACHINES = {"agents": [machine("sm-a", "worker-3"), machine("sm-b", "worker-9")],
            "other": [machine("sm-c", "worker-4", "other")]}


# --- host governance ---------------------------------------------------------------------------


def test_a_scheduled_capacity_on_a_node_a_scheduled_machine_governs_is_denied_with_the_remedy() -> None:
    response = review_host_governance(request(scap()), MACHINES, "Deny")
    assert not response.allowed and response.code == 403
    assert response.message is not None
    assert response.message.startswith("host-governance: spec.nodeName worker-3 is already governed "
                                        "by ScheduledMachine sm-a in namespace agents")
    assert "name another node, or leave spec.nodeName unset" in response.message


def test_warn_mode_allows_the_conflict_with_a_warning_naming_the_machine() -> None:
    response = review_host_governance(request(scap()), MACHINES, "Warn")
    assert response.allowed and response.verdict == "warned"
    assert response.warnings[0].startswith("host-governance: node worker-3 is governed by "
                                           "ScheduledMachine sm-a")


def test_a_node_governed_only_in_another_namespace_is_no_conflict() -> None:
    assert review_host_governance(request(scap(node="worker-4")), MACHINES, "Deny").allowed


def test_without_node_name_nothing_can_be_correlated_and_the_request_is_allowed() -> None:
    assert review_host_governance(request(scap(node=None)), MACHINES, "Deny").allowed


def test_an_update_that_keeps_a_conflicted_node_is_allowed_so_remedies_go_through() -> None:
    old = scap()
    new = scap(enabled=False)
    assert review_host_governance(request(new, operation="UPDATE", old=old), MACHINES, "Deny").allowed


def test_an_update_moving_onto_a_governed_node_is_denied() -> None:
    old = scap(node="worker-1")
    response = review_host_governance(request(scap(node="worker-9"), operation="UPDATE", old=old),
                                      MACHINES, "Deny")
    assert not response.allowed and "ScheduledMachine sm-b" in (response.message or "")


def test_host_governance_answers_a_missing_object_with_a_malformed_request_denial() -> None:
    response = review_host_governance(request(None), MACHINES, "Deny")
    assert not response.allowed and response.code == 400
    assert (response.message or "").startswith("host-governance: malformed AdmissionRequest: "
                                                "request.object is missing")


# --- the governed-target guard -------------------------------------------------------------------


def pool(warm: int | None = 2, labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"image": "sandbox:1"}}
    if warm is not None:
        spec["warmReplicas"] = warm
    return {"apiVersion": "pools.agents.example.com/v1alpha1", "kind": "VirtualMachinePool",
            "metadata": {"name": "sandboxes", "namespace": "agents", "labels": labels or {"a": "b"},
                         "resourceVersion": "10", "generation": 3, **meta},
            "spec": spec, "status": {"inUse": 1}}


def guard(new: dict[str, Any] | None, old: dict[str, Any] | None, operation: str = "UPDATE",
          user: str = CAPACITY, sub: str = "") -> dict[str, Any]:
    return request(new, operation=operation, old=old, user=user, group="pools.agents.example.com",
                   resource="virtualmachinepools", sub=sub)


def test_the_capacity_identity_may_change_the_allowlisted_field(bundle: WebhookBundle) -> None:
    new = pool(warm=7)
    new["metadata"].update(resourceVersion="11", generation=4,
                           managedFields=[{"manager": "fivespot-capacity-controller"}])
    assert review_target_guard(guard(new, pool(warm=2)), bundle).allowed


def test_adding_the_allowlisted_field_is_allowed_but_not_together_with_a_new_spec(bundle: WebhookBundle) -> None:
    old = pool(warm=None)
    del old["spec"]
    assert review_target_guard(guard(pool(warm=3), old), bundle).verdict == "denied"  # template too
    assert review_target_guard(guard(pool(warm=3), pool(warm=None)), bundle).allowed


def test_any_other_change_by_the_capacity_identity_is_denied_naming_the_fields(bundle: WebhookBundle) -> None:
    response = review_target_guard(guard(pool(warm=3, labels={"a": "c"}), pool(warm=2)), bundle)
    assert not response.allowed and response.code == 403
    assert (response.message or "").startswith(
        "target-guard: the capacity controller may change only spec.warmReplicas of "
        "VirtualMachinePool agents/sandboxes, but this request also changes metadata.labels.a")
    assert "changes that one field and nothing else, whatever patch type carries it" in \
        (response.message or "")


def test_a_type_change_that_python_would_call_equal_is_still_a_change(bundle: WebhookBundle) -> None:
    new = pool()
    new["spec"]["template"] = {"image": "sandbox:1", "replicas": True}
    old = pool()
    old["spec"]["template"] = {"image": "sandbox:1", "replicas": 1}
    assert changed_paths(old, new) == [("spec", "template", "replicas")]
    assert not review_target_guard(guard(new, old), bundle).allowed


@pytest.mark.parametrize("before,after,inside", [
    (1, 1.0, ()), (1, True, ()), (0, False, ()), ([2, 1.0], [2, 1], ("[1]",))])
def test_a_subtree_python_calls_equal_is_still_walked_for_type_changes(before: Any, after: Any,
                                                                        inside: tuple[str, ...]) -> None:
    old, new = pool(), pool()
    old["spec"]["template"] = {"image": "sandbox:1", "limits": {"cpu": before, "n": [2, 3]}}
    new["spec"]["template"] = {"image": "sandbox:1", "limits": {"cpu": after, "n": [2, 3]}}
    assert old == new
    assert changed_paths(old, new) == [("spec", "template", "limits", "cpu", *inside)]


def test_a_subtree_with_its_keys_in_another_order_is_unchanged() -> None:
    old, new = pool(), pool()
    old["spec"]["template"] = {"image": "sandbox:1", "env": {"A": "1", "B": "2"}}
    new["spec"]["template"] = {"env": {"B": "2", "A": "1"}, "image": "sandbox:1"}
    assert changed_paths(old, new) == []


def test_the_capacity_value_must_be_an_integer_within_the_consumer_ceiling(bundle: WebhookBundle) -> None:
    for bad in (33, -1, 2.5, True, "4"):
        response = review_target_guard(guard(pool(warm=bad), pool(warm=2)), bundle)  # type: ignore[arg-type]
        assert not response.allowed, bad
        assert "spec.warmReplicas of VirtualMachinePool agents/sandboxes must be an integer from 0 " \
               "to 32" in (response.message or "")
    assert not review_target_guard(guard(pool(warm=None), pool(warm=2)), bundle).allowed


@pytest.mark.parametrize("operation,words", [
    ("CREATE", "may not create VirtualMachinePool objects"),
    ("DELETE", "may not delete VirtualMachinePool agents/sandboxes; draining and deleting belong "
               "to the consumer"),
])
def test_the_capacity_identity_may_never_create_or_delete_a_target(
        bundle: WebhookBundle, operation: str, words: str) -> None:
    new, old = (pool(), None) if operation == "CREATE" else (None, pool())
    response = review_target_guard(guard(new, old, operation=operation), bundle)
    assert not response.allowed and words in (response.message or "")


@pytest.mark.parametrize("sub", ["status", "scale", "anything"])
def test_a_subresource_write_by_the_capacity_identity_is_denied(bundle: WebhookBundle, sub: str) -> None:
    for operation in ("UPDATE", "CREATE"):
        response = review_target_guard(guard(pool(), pool(), operation=operation, sub=sub), bundle)
        assert not response.allowed
        assert (response.message or "").startswith(
            f"target-guard: the capacity controller may not write the {sub} subresource of "
            "VirtualMachinePool agents/sandboxes; it may only change spec.warmReplicas on the "
            "object itself")


def test_field_ownership_is_judged_and_a_wipe_of_it_is_denied_saying_whose(bundle: WebhookBundle) -> None:
    owned = [{"manager": "kubectl-create", "operation": "Update",
              "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:template": {}}}}]
    response = review_target_guard(guard(pool(warm=2), pool(warm=2, managedFields=owned)), bundle)
    assert not response.allowed
    assert (response.message or "").startswith(
        "target-guard: the capacity controller may change only spec.warmReplicas of "
        "VirtualMachinePool agents/sandboxes, but this request also changes metadata.managedFields "
        "(kubectl-create would no longer own metadata.labels.a, spec.template: field ownership "
        "is not the controller's to change)")
    taken_over = [{"manager": "fivespot-capacity-controller", "operation": "Update",
                   "fieldsV1": {"f:spec": {"f:warmReplicas": {}}}}]
    assert review_target_guard(guard(pool(warm=3, managedFields=owned + taken_over),
                                     pool(warm=2, managedFields=owned)), bundle).allowed


def test_other_identities_and_other_kinds_are_not_the_guards_business(bundle: WebhookBundle) -> None:
    assert review_target_guard(guard(pool(labels={"x": "y"}), pool(), user="alice"), bundle).allowed
    other = request(pool(), operation="DELETE", user=CAPACITY, group="apps", resource="deployments")
    assert review_target_guard(other, bundle).allowed


# --- the polyfill --------------------------------------------------------------------------------


def test_the_polyfill_denies_exactly_as_the_shared_evaluator_with_the_check_name_first(
        bundle: WebhookBundle) -> None:
    assert bundle.policies is not None
    outside = request(scap(namespace="team-x", node=None), namespace="team-x")
    expected = evaluate(bundle.policies, outside)
    response = review_polyfill(outside, bundle.policies, lambda name: None)
    assert not expected.allowed and not response.allowed
    assert response.message == "vap-polyfill: " + "; ".join(v.message for v in expected.violations)
    assert "fivespot-scap-tenancy: namespace team-x has no TenantPolicy" in response.message
    assert response.code == 403 and response.reason == "Forbidden"
    inside = request(scap(node=None), namespace="agents")
    assert review_polyfill(inside, bundle.policies, lambda name: None).allowed


def test_the_polyfill_reads_the_namespace_object_only_when_a_binding_needs_its_labels() -> None:
    data = bundle_data(polyfill=True)
    for obj in data["admission"]["policies"]:
        if obj["kind"] == "ValidatingAdmissionPolicyBinding" and \
                obj["metadata"]["name"] == "fivespot-scap-tenancy":
            obj["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": {"tier": "tenant"}}}
    policies = parse_webhook_bundle(data).policies
    assert policies is not None
    outside = request(scap(namespace="team-x", node=None), namespace="team-x")
    unknown = review_polyfill(outside, policies, lambda name: None)
    assert not unknown.allowed and unknown.code == 503
    assert (unknown.message or "").startswith("vap-polyfill: namespace team-x is not in the "
                                              "webhook's cache yet")
    labelled = {"metadata": {"name": "team-x", "labels": {"tier": "tenant"}}}
    assert not review_polyfill(outside, policies, lambda name: labelled).allowed
    unlabelled = {"metadata": {"name": "team-x", "labels": {}}}
    assert review_polyfill(outside, policies, lambda name: unlabelled).allowed


def test_without_the_polyfill_enabled_the_polyfill_path_allows_everything() -> None:
    plain = parse_webhook_bundle(bundle_data(polyfill=False))
    outside = request(scap(namespace="team-x", node=None), namespace="team-x")
    assert plain.policies is None
    assert review(VAP_POLYFILL, outside, plain, Lookups({}, lambda n: None, lambda k: ())).allowed


# --- dispatch and parsing ------------------------------------------------------------------------


@pytest.mark.parametrize("namespace", ["5spot-system", "kube-system"])
def test_host_governance_and_the_polyfill_never_decide_in_the_webhooks_own_namespace_or_kube_system(
        bundle: WebhookBundle, namespace: str) -> None:
    lookups = Lookups({namespace: [machine("sm", "worker-3", namespace)]}, lambda n: None, lambda k: ())
    conflicted = request(scap(namespace=namespace), namespace=namespace)
    assert review(HOST_GOVERNANCE, conflicted, bundle, lookups).allowed
    assert review(VAP_POLYFILL, request(scap(namespace=namespace), namespace=namespace), bundle,
                  lookups).allowed


@pytest.mark.parametrize("namespace", ["5spot-system", "kube-system"])
def test_the_target_guard_decides_the_capacity_identitys_writes_in_every_namespace(
        bundle: WebhookBundle, namespace: str) -> None:
    lookups = Lookups({}, lambda n: None, lambda k: ())
    deleting = guard(None, pool(), operation="DELETE")
    relabelling = guard(pool(labels={"a": "z"}), pool())
    for write in (deleting, relabelling):
        write["namespace"] = namespace
        assert not review(TARGET_GUARD, write, bundle, lookups).allowed
    scaling = guard(pool(warm=5), pool(warm=2))
    scaling["namespace"] = namespace
    assert review(TARGET_GUARD, scaling, bundle, lookups).allowed


@pytest.mark.parametrize("body,words", [
    (b"{not json", "not JSON"),
    (b"[1, 2]", "not an object"),
    (json.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
                 "request": {"uid": "u"}}).encode(), "expected apiVersion admission.k8s.io/v1"),
    (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
     "no request object"),
    (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                 "request": {"uid": ""}}).encode(), "no uid"),
    (b"[" * 100_000, "not JSON"),
])
def test_a_body_that_is_not_a_v1_review_with_a_uid_is_rejected_with_a_reason(
        body: bytes, words: str) -> None:
    with pytest.raises(Rejected) as rejected:
        parse_review(body)
    assert rejected.value.status == 400 and words in rejected.value.message


def test_a_denial_serialises_as_an_admission_review_v1_response() -> None:
    response = review_host_governance(request(scap()), MACHINES, "Deny")
    assert response.review() == {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": "uid-1", "allowed": False,
                     "status": {"code": 403, "reason": "Forbidden", "message": response.message}}}


def test_a_bundle_from_another_release_is_refused_with_what_to_do() -> None:
    data = copy.deepcopy(bundle_data())
    data["bundleVersion"] = 2
    with pytest.raises(BundleError, match="recompile with the same fivespot release"):
        parse_webhook_bundle(data)


def test_the_polyfill_compiles_the_bundles_policies_with_the_shared_evaluator(bundle: WebhookBundle) -> None:
    assert isinstance(bundle.policies, PolicySet)
    assert set(bundle.policies.policies) == {"fivespot-scap-tenancy", "fivespot-scap-schedule-kinds",
                                             "fivespot-tenant-limits"}


def scale(replicas: int, version: str = "10") -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "web", "namespace": "agents", "resourceVersion": version},
            "spec": {"replicas": replicas}, "status": {"replicas": 1, "selector": "app=web"}}


@pytest.fixture(scope="module")
def deployments_bundle() -> WebhookBundle:
    data = bundle_data()
    data["consumers"].append({"capacityPaths": ["spec.replicas"], "group": "apps",
                              "kind": "Deployment", "maxActiveValue": 10, "name": "deployments",
                              "resource": "deployments", "version": "v1"})
    return parse_webhook_bundle(data)


def test_on_clusters_without_the_guards_policy_it_judges_a_scale_write_by_its_value_alone(
        deployments_bundle: WebhookBundle) -> None:
    """Decision 0050: a Deployment gated on its replicas is written through `/scale`; where no
    ValidatingAdmissionPolicy judges that write, the webhook does, as an update of that field."""
    def scaled(new: dict[str, Any], old: dict[str, Any], operation: str = "UPDATE") -> Any:
        return review_target_guard(request(new, operation=operation, old=old, user=CAPACITY,
                                           group="apps", resource="deployments", sub="scale"),
                                   deployments_bundle)
    assert scaled(scale(10, "11"), scale(0)).allowed
    to_zero = scale(0, "12")
    del to_zero["spec"]["replicas"]  # as the API server sends a Scale of 0 (omitempty)
    assert scaled(to_zero, scale(10, "11")).allowed
    denied = scaled(scale(11, "11"), scale(0))
    assert not denied.allowed and (denied.message or "").startswith(
        "target-guard: spec.replicas of Deployment agents/web must be an integer from 0 to 10")
    assert not scaled(scale(3), scale(0), operation="CREATE").allowed
    status = review_target_guard(request(scale(3), operation="UPDATE", old=scale(0), user=CAPACITY,
                                         group="apps", resource="deployments", sub="status"),
                                 deployments_bundle)
    assert not status.allowed, "only /scale, and only for a consumer written through it"
