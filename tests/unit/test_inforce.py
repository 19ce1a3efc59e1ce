"""Which policies are in force (`fivespot.controllers.inforce.in_force`): the cluster's copies of
fivespot's policies with the cluster's bindings of them, the bundle's where the cluster has none
or its copy does not compile here; nobody else's policies. Decided on the compiled example."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from fivespot.api.bundle import parse_bundle
from fivespot.compiler.pipeline import compile_repo
from fivespot.controllers.inforce import as_created, compile_in_force, in_force
from fivespot.policies import admission as rules
from fivespot.policies.admission_eval import PolicySet, review

pytestmark = pytest.mark.unit

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent-sandbox" / "config"
Objects = list[dict[str, Any]]


@pytest.fixture(scope="module")
def bundle() -> tuple[Objects, Objects]:
    """The example's compiled (policies and bindings, params)."""
    compiled = parse_bundle(json.loads(compile_repo(EXAMPLE).files["bundle.json"]))
    return list(compiled.admission.policies), list(compiled.admission.params)


def named(objects: Objects, name: str, kind: str = "ValidatingAdmissionPolicy") -> dict[str, Any]:
    return copy.deepcopy(next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name))


def tenancy_for(objects: Objects, namespaces: list[str]) -> dict[str, Any]:
    """The tenancy policy as a later output compiles it: tenants `namespaces`."""
    policy = named(objects, rules.TENANCY)
    literal = "[" + ", ".join(f"'{n}'" for n in namespaces) + "]"
    policy["spec"]["variables"] = [{"name": rules.TENANT_NAMESPACES_VARIABLE, "expression": literal}]
    policy["metadata"]["resourceVersion"] = "7"
    return policy


def scap(namespace: str, value: int = 2) -> dict[str, Any]:
    return {"apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
            "metadata": {"name": "pool", "namespace": namespace},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": "open"},
                     "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                                   "kind": "VirtualMachinePool", "name": "pool"},
                     "capacity": {"path": "spec.warmReplicas", "activeValue": value}}}


def denials(objects: Sequence[Mapping[str, Any]], params: Objects, obj: dict[str, Any]) -> list[str]:
    policies = PolicySet.compile(objects, params)
    verdict = review(policies, as_created(obj, obj["metadata"]["namespace"]))
    return [v.message for v in verdict.violations]


def test_a_namespace_the_clusters_tenancy_policy_no_longer_lists_is_out_of_policy(
        bundle: tuple[Objects, Objects]) -> None:
    compiled, params = bundle
    live = tenancy_for(compiled, ["agents-gpu"])
    binding = named(compiled, rules.TENANCY, "ValidatingAdmissionPolicyBinding")
    found = in_force(compiled, [live], [binding])
    [message] = denials(found, params, scap("agents"))
    assert "namespace agents has no TenantPolicy" in message
    assert denials(compiled, params, scap("agents")) == [], "the bundle alone still admits it"


def test_a_policy_the_cluster_has_no_copy_of_is_judged_as_the_bundle_compiled_it(
        bundle: tuple[Objects, Objects]) -> None:
    compiled, params = bundle
    found = in_force(compiled, [], [])
    assert found == compiled
    assert denials(found, params, scap("agents")) == []
    assert "has no TenantPolicy" in denials(found, params, scap("lab"))[0]


def test_a_policy_in_the_cluster_without_a_binding_there_is_not_in_force_as_in_the_api_server(
        bundle: tuple[Objects, Objects]) -> None:
    compiled, params = bundle
    found = in_force(compiled, [tenancy_for(compiled, [])], [])
    assert denials(found, params, scap("lab")) == []


def test_the_clusters_bindings_replace_the_bundles_for_a_policy_the_cluster_has(
        bundle: tuple[Objects, Objects]) -> None:
    """`agents` moved off the tenant-limits binding in the cluster: its limit no longer applies,
    though the bundle still binds it."""
    compiled, params = bundle
    limits = named(compiled, rules.TENANT_LIMITS)
    gpu = named(compiled, f"{rules.TENANT_LIMITS}-agents-gpu", "ValidatingAdmissionPolicyBinding")
    over = scap("agents", 11)
    assert any("exceeds the limit 10 of TenantPolicy agents" in m for m in denials(compiled, params, over))
    found = in_force(compiled, [limits], [gpu])
    assert not any("TenantPolicy agents;" in m for m in denials(found, params, over))
    names = [o["metadata"]["name"] for o in found if o["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert f"{rules.TENANT_LIMITS}-agents" not in names and f"{rules.TENANT_LIMITS}-agents-gpu" in names


def test_policies_and_bindings_that_are_not_fivespots_are_not_judged(
        bundle: tuple[Objects, Objects]) -> None:
    compiled, params = bundle
    theirs = tenancy_for(compiled, [])
    theirs["metadata"]["name"] = "someone-elses"
    binding = {"apiVersion": "admissionregistration.k8s.io/v1",
               "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "someone-elses"},
               "spec": {"policyName": "someone-elses", "validationActions": ["Deny"]}}
    assert in_force(compiled, [theirs], [binding]) == compiled


def test_a_clusters_copy_that_does_not_compile_here_is_replaced_by_the_bundles(
        bundle: tuple[Objects, Objects]) -> None:
    compiled, params = bundle
    broken = tenancy_for(compiled, ["agents-gpu"])
    broken["spec"]["validations"][0]["expression"] = "request.namespace in variables.("
    binding = named(compiled, rules.TENANCY, "ValidatingAdmissionPolicyBinding")
    policies, unusable = compile_in_force(compiled, [broken], [binding])
    assert list(unusable) == [rules.TENANCY]
    verdict = review(policies.with_params(params), as_created(scap("agents"), "agents"))
    assert verdict.allowed, "judged by the bundle's copy, which lists agents"


# --- the answer memoised by the informers' revisions -----------------------------------------------


class Watched:
    """An informer's cache as PoliciesInForce reads it: its objects and its resourceVersion."""

    def __init__(self, name: str, objects: Objects, version: str | None = "10") -> None:
        self.name, self.objects, self.resource_version = name, objects, version
        self.lists = 0

    def has_synced(self) -> bool:
        return True

    def list(self, namespace: str | None = None) -> Objects:
        self.lists += 1
        return list(self.objects)

    def add_handler(self, handler: Any) -> None:
        pass


class Stand:
    """What PoliciesInForce asks of its Manager: the bundle, two informers, kind watches."""

    def __init__(self, admission: Any, policies: Watched, bindings: Watched) -> None:
        self.settings = type("S", (), {"bundle": type("B", (), {"admission": admission})})()
        self._informers = iter((policies, bindings))
        self.params = Watched("params", list(admission.params))

    def informer(self, group: str, version: str, plural: str) -> Watched:
        return next(self._informers)

    def kind_watches(self, on_event: Any) -> Any:
        """Every params kind served, its cache holding the bundle's params."""
        watched = type("W", (), {"informer": self.params, "last_error": None})()
        return type("K", (), {"want": lambda self, group, kind: None,
                              "get": lambda self, group, kind: watched})()


@pytest.fixture
def live(bundle: tuple[Objects, Objects]) -> tuple[Any, Watched, Watched]:
    from fivespot.api.bundle import Admission
    from fivespot.controllers.inforce import PoliciesInForce
    objects, params = bundle
    policies = Watched("policies", [o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"])
    bindings = Watched("bindings", [o for o in objects if o["kind"] != "ValidatingAdmissionPolicy"])
    admission = Admission(policies=tuple(objects), params=tuple(params), vaps=True)
    return PoliciesInForce(Stand(admission, policies, bindings), lambda *a: None), policies, bindings  # type: ignore[arg-type]


def test_the_policies_in_force_are_not_listed_again_while_their_informers_stand_still(
        live: tuple[Any, Watched, Watched]) -> None:
    in_force_now, policies, bindings = live
    first = in_force_now.policies()
    assert in_force_now.policies() is first
    assert (policies.lists, bindings.lists) == (1, 1)


def test_a_policy_changed_in_the_cluster_is_in_force_once_its_informer_moves(
        live: tuple[Any, Watched, Watched], bundle: tuple[Objects, Objects]) -> None:
    in_force_now, policies, _ = live
    version, _ = in_force_now.policies()
    policies.objects = [tenancy_for(bundle[0], ["desk"]) if o["metadata"]["name"] == rules.TENANCY
                        else o for o in policies.objects]
    assert in_force_now.policies()[0] == version  # the cache has it; the revision says nothing yet
    policies.resource_version = "11"
    assert in_force_now.policies()[0] != version


def test_an_informer_without_a_revision_is_listed_every_time(
        live: tuple[Any, Watched, Watched]) -> None:
    in_force_now, policies, _ = live
    policies.resource_version = None
    in_force_now.policies()
    in_force_now.policies()
    assert policies.lists == 2


# --- each object's verdict memoised by what a create of it would show --------------------------


def stored(namespace: str, *, version: str, phase: str = "Active", uid: str = "u1",
           value: int = 2) -> dict[str, Any]:
    obj = scap(namespace, value)
    obj["metadata"].update({"uid": uid, "resourceVersion": version, "generation": 1,
                            "managedFields": [{"manager": "m", "time": version}]})
    obj["status"] = {"phase": phase}
    return obj


@pytest.fixture
def reviews(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every review PoliciesInForce makes, by its request."""
    from fivespot.controllers import inforce
    seen: list[dict[str, Any]] = []
    real = review

    def counted(policies: Any, request: dict[str, Any]) -> Any:
        seen.append(request)
        return real(policies, request)

    monkeypatch.setattr(inforce, "review", counted)
    return seen


def test_an_object_whose_status_alone_changed_is_not_judged_again(
        live: tuple[Any, Watched, Watched], reviews: list[dict[str, Any]]) -> None:
    from fivespot.controllers.inforce import WithinPolicy
    in_force_now, _, _ = live
    first = in_force_now.observe(stored("agents", version="5"))
    again = in_force_now.observe(stored("agents", version="6", phase="HandingBack"))
    assert isinstance(first, WithinPolicy) and again is first
    assert len(reviews) == 1
    assert "status" not in reviews[0]["object"], "a create of it would carry no status"
    assert "resourceVersion" not in reviews[0]["object"]["metadata"]


def test_an_object_whose_spec_or_metadata_changed_is_judged_again(
        live: tuple[Any, Watched, Watched], reviews: list[dict[str, Any]]) -> None:
    in_force_now, _, _ = live
    in_force_now.observe(stored("agents", version="5", value=2))
    in_force_now.observe(stored("agents", version="6", value=3))
    labelled = stored("agents", version="7", value=3)
    labelled["metadata"]["labels"] = {"team": "desk"}
    in_force_now.observe(labelled)
    assert len(reviews) == 3


def test_an_object_is_judged_again_once_the_policies_in_force_change(
        live: tuple[Any, Watched, Watched], bundle: tuple[Objects, Objects],
        reviews: list[dict[str, Any]]) -> None:
    from fivespot.controllers.inforce import OutOfPolicy, WithinPolicy
    in_force_now, policies, _ = live
    assert isinstance(in_force_now.observe(stored("agents", version="5")), WithinPolicy)
    policies.objects = [tenancy_for(bundle[0], ["desk"]) if o["metadata"]["name"] == rules.TENANCY
                        else o for o in policies.objects]
    policies.resource_version = "11"
    assert isinstance(in_force_now.observe(stored("agents", version="5")), OutOfPolicy)
    assert len(reviews) == 2


def test_another_object_of_the_same_spec_is_judged_on_its_own(
        live: tuple[Any, Watched, Watched], reviews: list[dict[str, Any]]) -> None:
    in_force_now, _, _ = live
    in_force_now.observe(stored("agents", version="5", uid="u1"))
    in_force_now.observe(stored("agents", version="5", uid="u2"))
    assert len(reviews) == 2
