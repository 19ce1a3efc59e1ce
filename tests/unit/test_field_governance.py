"""One field, one governor: the rule (`api.fieldgovernance`) and the webhook's check on it
(`webhook.review.review_field_governance`), as pure functions."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from api.fieldgovernance import (
    CHECK,
    Claim,
    GovernedBy,
    Governs,
    claim_of,
    conflicts,
    denial,
    overlaps,
    standing,
    standings,
    target_key,
)
from webhook.review import FIELD_GOVERNANCE, Lookups, review, review_field_governance

pytestmark = pytest.mark.unit

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


def claim(name: str, path: str = "spec.warmReplicas", *, age_s: int = 0, version: str = "v1alpha1",
          target: str = "sandboxes", kind: str = "VirtualMachinePool", namespace: str = "agents",
          created: bool = True) -> Claim:
    return Claim(namespace, name, f"pools.agents.example.com/{version}", kind, target, path,
                 T0 - timedelta(seconds=age_s) if created else None)


def scap(name: str, path: str = "spec.warmReplicas", *, version: str = "v1alpha1",
         target: str = "sandboxes", created: str | None = "2026-03-02T08:00:00Z",
         namespace: str | None = "agents") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if created is not None:
        meta["creationTimestamp"] = created
    return {
        "apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity", "metadata": meta,
        "spec": {
            "schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                         "kind": "ManualSchedule", "name": "window"},
            "targetRef": {"apiVersion": f"pools.agents.example.com/{version}",
                          "kind": "VirtualMachinePool", "name": target},
            "capacity": {"path": path, "activeValue": 4},
        },
    }


# --- the rule ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("spec.warmReplicas", "spec.warmReplicas", True),
    ("spec.a", "spec.a.b", True),
    ("spec.a.b", "spec.a", True),
    ("spec.a", "spec.ab", False),
    ("spec.a.b", "spec.a.c", False),
    ("spec.replicas", "spec.warmReplicas", False),
])
def test_two_paths_on_one_object_overlap_when_equal_or_one_is_a_prefix_segment_by_segment(
        a: str, b: str, expected: bool) -> None:
    assert overlaps(claim("x", a), claim("y", b)) is expected
    assert overlaps(claim("y", b), claim("x", a)) is expected


def test_the_same_object_through_another_version_is_the_same_target() -> None:
    assert overlaps(claim("x", version="v1alpha1"), claim("y", version="v1"))
    assert claim("x", version="v1alpha1").key == claim("y", version="v1").key == \
        target_key("agents", "pools.agents.example.com/v2", "VirtualMachinePool", "sandboxes")


@pytest.mark.parametrize("other", [
    claim("y", target="other-pool"), claim("y", kind="Pool"), claim("y", namespace="team-b"),
    Claim("agents", "y", "other.example.com/v1alpha1", "VirtualMachinePool", "sandboxes",
          "spec.warmReplicas"),
])
def test_another_object_name_kind_namespace_or_group_is_another_target(other: Claim) -> None:
    assert not overlaps(claim("x"), other)


def test_an_object_never_conflicts_with_itself() -> None:
    assert not overlaps(claim("x", age_s=5), claim("x", "spec.warmReplicas.deep"))
    assert conflicts(claim("x"), [claim("x", age_s=9)]) == []


def test_the_oldest_governs_then_the_name_breaks_a_tie_of_the_same_second() -> None:
    old, young = claim("zeta", age_s=60), claim("alpha")
    found = standings([young, old])
    assert found[("agents", "zeta")] == Governs((young,))
    assert found[("agents", "alpha")] == GovernedBy(old)
    tie = standings([claim("b"), claim("a")])
    assert tie[("agents", "a")] == Governs((claim("b"),))
    assert tie[("agents", "b")] == GovernedBy(claim("a"))


def test_a_claim_not_created_yet_comes_after_every_created_one() -> None:
    assert standing(claim("new", created=False), [claim("zzz")]) == GovernedBy(claim("zzz"))


def test_a_blocked_claim_blocks_nobody_so_two_disjoint_fields_both_govern() -> None:
    inner, outer, sibling = claim("c", "spec.a.b", age_s=30), claim("b", "spec.a", age_s=20), \
        claim("a", "spec.a.c", age_s=10)
    found = standings([outer, sibling, inner])
    assert found[("agents", "c")] == Governs((outer,))
    assert found[("agents", "b")] == GovernedBy(inner)
    assert found[("agents", "a")] == Governs((outer,))


def test_deleting_the_governor_hands_the_field_to_the_next_in_order() -> None:
    first, second, third = claim("first", age_s=30), claim("second", age_s=20), claim("third")
    assert standing(second, [first, third]) == GovernedBy(first)
    assert standing(second, [third]) == Governs((third,))
    assert standing(third, [second]) == GovernedBy(second)


def test_a_raw_object_makes_a_claim_only_when_it_names_a_writable_field() -> None:
    made = claim_of(scap("cap"))
    assert made == Claim("agents", "cap", "pools.agents.example.com/v1alpha1", "VirtualMachinePool",
                         "sandboxes", "spec.warmReplicas", datetime(2026, 3, 2, 8, tzinfo=timezone.utc))
    assert claim_of(scap("cap", namespace=None), "from-request") is not None
    assert claim_of(scap("cap", namespace=None)) is None
    assert claim_of(scap("cap", "metadata.labels")) is None
    assert claim_of({"metadata": {"name": "x"}, "spec": {"targetRef": "pool"}}) is None
    assert claim_of(scap("cap", created="yesterday")) == claim("cap", created=False)


def test_the_denial_names_the_governor_its_path_and_the_way_to_combine_schedules() -> None:
    message = denial(claim("override", "spec.pool.size"), [claim("office-hours", "spec.pool"),
                                                           claim("other", "spec.pool")])
    assert message.startswith(f"{CHECK}: spec.capacity.path spec.pool.size of "
                              "VirtualMachinePool.pools.agents.example.com agents/sandboxes is "
                              "already governed by ScheduledCapacity agents/office-hours (its "
                              "spec.capacity.path spec.pool overlaps spec.pool.size) and 1 more")
    assert "CompositeSchedule" in message and "point a single ScheduledCapacity at it" in message


# --- the webhook check -------------------------------------------------------------------------


def request(obj: dict[str, Any] | None, *, operation: str = "CREATE",
            old: dict[str, Any] | None = None, resource: str = "scheduledcapacities",
            namespace: str = "agents") -> dict[str, Any]:
    return {
        "uid": "uid-1", "operation": operation, "namespace": namespace,
        "name": (obj or old or {}).get("metadata", {}).get("name", ""),
        "kind": {"group": "5spot.finos.org", "version": "v1alpha1", "kind": "ScheduledCapacity"},
        "resource": {"group": "5spot.finos.org", "version": "v1alpha1", "resource": resource},
        "subResource": "", "userInfo": {"username": "alice"},
        "object": obj, "oldObject": old, "dryRun": False,
    }


def existing(*objects: dict[str, Any]) -> Any:
    by_key: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        made = claim_of(obj)
        assert made is not None
        by_key.setdefault(made.key, []).append(obj)
    return lambda key: by_key.get(key, [])


GOVERNOR = scap("office-hours")


def _create(obj: dict[str, Any]) -> dict[str, Any]:
    """A CREATE carries no namespace or creationTimestamp in the object yet."""
    obj["metadata"].pop("creationTimestamp", None)
    obj["metadata"].pop("namespace", None)
    return request(obj)


@pytest.mark.parametrize(("path", "version"), [
    ("spec.warmReplicas", "v1alpha1"), ("spec.warmReplicas.extra", "v1alpha1"),
    ("spec.warmReplicas", "v1"),
])
def test_a_second_governor_of_a_field_is_denied_naming_the_first(path: str, version: str) -> None:
    answer = review_field_governance(_create(scap("override", path, version=version)),
                                     existing(GOVERNOR))
    assert not answer.allowed and answer.code == 403
    assert answer.message is not None and answer.message.startswith(
        f"{FIELD_GOVERNANCE}: spec.capacity.path {path} of VirtualMachinePool.pools.agents.example.com "
        "agents/sandboxes is already governed by ScheduledCapacity agents/office-hours")


def test_another_field_or_another_object_is_admitted() -> None:
    rivals = existing(GOVERNOR)
    assert review_field_governance(_create(scap("o", "spec.replicas")), rivals).allowed
    assert review_field_governance(_create(scap("o", target="other")), rivals).allowed


def test_an_update_moving_onto_a_governed_field_is_denied() -> None:
    before = scap("override", target="other")
    after = scap("override", version="v1")
    answer = review_field_governance(request(after, operation="UPDATE", old=before),
                                     existing(GOVERNOR, before))
    assert not answer.allowed
    assert answer.message is not None and "ScheduledCapacity agents/office-hours" in answer.message


def test_an_update_that_keeps_the_claim_passes_so_a_loser_admitted_earlier_stays_editable() -> None:
    loser = scap("override", created="2026-03-02T08:05:00Z")
    edited = {**loser, "spec": {**loser["spec"], "enabled": False}}
    assert review_field_governance(request(edited, operation="UPDATE", old=loser),
                                   existing(GOVERNOR, loser)).allowed


def test_the_object_itself_on_update_is_not_its_own_rival() -> None:
    before = scap("office-hours", "spec.warmReplicas")
    after = scap("office-hours", "spec.warmReplicas.inner")
    assert review_field_governance(request(after, operation="UPDATE", old=before),
                                   existing(before)).allowed


def test_deletes_other_resources_and_objects_naming_no_field_pass() -> None:
    rivals = existing(GOVERNOR)
    assert review_field_governance(request(None, operation="DELETE", old=GOVERNOR), rivals).allowed
    assert review_field_governance(request(scap("x"), resource="scheduledmachines"), rivals).allowed
    assert review_field_governance(_create(scap("x", "status.bad")), rivals).allowed


def test_a_malformed_request_is_a_clear_denial() -> None:
    broken = request(scap("x"))
    broken["object"] = "not an object"
    answer = review_field_governance(broken, existing())
    assert not answer.allowed and answer.code == 400
    assert answer.message is not None and answer.message.startswith(
        f"{FIELD_GOVERNANCE}: malformed AdmissionRequest: request.object")


def test_the_dispatcher_routes_the_check_and_exempts_the_excluded_namespaces() -> None:
    from tests.unit.test_webhook_review import parse_webhook_bundle, bundle_data

    bundle = parse_webhook_bundle(bundle_data())
    lookups = Lookups({}, lambda n: None, existing(GOVERNOR))
    assert not review(FIELD_GOVERNANCE, _create(scap("override")), bundle, lookups).allowed
    system = scap("override", namespace="kube-system")
    lookups = Lookups({}, lambda n: None, existing(scap("office-hours", namespace="kube-system")))
    assert review(FIELD_GOVERNANCE, request(system, namespace="kube-system"), bundle, lookups).allowed
