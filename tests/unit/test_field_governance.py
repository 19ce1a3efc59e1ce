"""One field, one governor: the rule (`fivespot.api.fieldgovernance`) and the webhook's check on it
(`fivespot.webhook.review.review_field_governance`), as pure functions."""

from __future__ import annotations

import functools
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from fivespot.api.fieldgovernance import (
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
    through_scale,
)
from fivespot.webhook.review import FIELD_GOVERNANCE, Lookups, review, review_field_governance

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


# --- fivespot check over a set of files ----------------------------------------------------------


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from fivespot.compiler.output import write_tree
    from fivespot.compiler.pipeline import compile_repo
    from tests.unit.test_cli_check import EXAMPLE

    out = tmp_path_factory.mktemp("out")
    write_tree(compile_repo(EXAMPLE).files, out)
    return out


def _file(path: Any, *objects: dict[str, Any]) -> Any:
    import yaml

    path.write_text(yaml.safe_dump_all(list(objects), sort_keys=False))
    return path


def _check(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, dict[str, Any]]:
    import json

    from fivespot.cli.main import main

    code = main(["check", *map(str, argv), "-o", "json"])
    results = json.loads(capsys.readouterr().out)["results"]
    return code, {r["object"]["name"]: r for r in results}


def _file_scap(name: str, path: str = "spec.warmReplicas", version: str = "v1alpha1",
               target: str = "sandboxes", **meta: str) -> dict[str, Any]:
    obj = scap(name, path, version=version, target=target, created=None)
    obj["metadata"].update(meta)
    return obj


def test_check_over_several_files_denies_the_second_governor_naming_the_first_and_its_file(
        out_dir: Any, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    first = _file(tmp_path / "office-hours.yaml", _file_scap("office-hours"))
    second = _file(tmp_path / "override.yaml", _file_scap("override", version="v1"),
                   _file_scap("elsewhere", target="other-pool"))
    code, found = _check(capsys, second, first, "--policies", out_dir)
    assert code == 1
    assert found["office-hours"]["allowed"] and found["elsewhere"]["allowed"]
    denied = found["override"]
    assert not denied["allowed"]
    [violation] = denied["violations"]
    assert (violation["source"], violation["policy"], violation["field"]) == \
        ("webhook", "field-governance.5spot.finos.org", "spec.capacity.path")
    assert violation["message"].startswith(
        "field-governance: spec.capacity.path spec.warmReplicas of VirtualMachinePool."
        "pools.agents.example.com agents/sandboxes is already governed by ScheduledCapacity "
        "agents/office-hours")
    assert violation["message"].endswith(f"ScheduledCapacity agents/office-hours is defined at {first}:4:3")


def test_check_orders_governors_as_the_controller_does_oldest_first_whatever_the_file_order(
        out_dir: Any, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    objects = _file(tmp_path / "all.yaml",
                    _file_scap("aaa", creationTimestamp="2026-03-02T09:00:00Z"),
                    _file_scap("zzz", creationTimestamp="2026-03-01T09:00:00Z"))
    code, found = _check(capsys, objects, "--policies", out_dir)
    assert code == 1 and found["zzz"]["allowed"] and not found["aaa"]["allowed"]
    assert "governed by ScheduledCapacity agents/zzz (its spec.capacity.path is spec.warmReplicas " \
        "too)" in found["aaa"]["violations"][0]["message"]


def test_an_object_the_policies_deny_governs_nothing(out_dir: Any, tmp_path: Any,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    refused = _file_scap("aaa")
    refused["spec"]["capacity"]["activeValue"] = 33  # over the consumer's maxActiveValue
    objects = _file(tmp_path / "all.yaml", refused, _file_scap("bbb"))
    code, found = _check(capsys, objects, "--policies", out_dir)
    assert code == 1 and found["bbb"]["allowed"]
    assert all(v["source"] != "webhook" for v in found["aaa"]["violations"])


def test_an_update_keeping_its_claim_passes_with_a_warning_as_at_admission(
        out_dir: Any, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    loser = _file_scap("override", creationTimestamp="2026-03-02T09:00:00Z")
    edited = {**loser, "spec": {**loser["spec"], "enabled": False}}
    governor = _file_scap("office-hours", creationTimestamp="2026-03-01T09:00:00Z")
    new = _file(tmp_path / "new.yaml", edited, governor)
    old = _file(tmp_path / "old.yaml", loser)
    code, found = _check(capsys, new, "--old", old, "--policies", out_dir)
    assert code == 0 and found["override"]["operation"] == "UPDATE"
    [warning] = found["override"]["warnings"]
    assert warning.startswith("field-governance: ScheduledCapacity agents/office-hours governs "
                              "spec.warmReplicas") and "writes nothing" in warning


def test_a_denial_is_confirmed_against_the_api_server_so_a_just_deleted_governor_blocks_nobody(
) -> None:
    rivals = existing(GOVERNOR)
    gone = review_field_governance(_create(scap("replacement")), rivals, lambda ns, name: None)
    assert gone.allowed
    moved = scap("office-hours", target="another-pool")
    assert review_field_governance(_create(scap("replacement")), rivals,
                                   lambda ns, name: moved).allowed
    still = review_field_governance(_create(scap("replacement")), rivals,
                                    lambda ns, name: GOVERNOR)
    assert not still.allowed

    def unreadable(namespace: str, name: str) -> dict[str, Any]:
        raise TimeoutError("the API server did not answer")
    assert not review_field_governance(_create(scap("replacement")), rivals, unreadable).allowed


# --- check over many objects: the same answer as claim-against-all, in time linear in them ------


def _naive(checked: list[Any]) -> list[bool]:
    """The rule applied literally: every claim's standing among every admitted claim."""
    claims = [c.claim for c in checked]
    admitted = [c for c, item in zip(claims, checked) if c is not None and item.verdict.allowed]
    return [item.verdict.allowed and not (c is not None and isinstance(standing(c, admitted), GovernedBy))
            for c, item in zip(claims, checked)]


def _checked(objects: list[dict[str, Any]], allowed: list[bool]) -> list[Any]:
    from fivespot.compiler.check.governance import Checked, object_claim
    from fivespot.compiler.diagnostics import Location
    from fivespot.policies.admission_eval import Verdict

    return [Checked(object_claim(o, "agents"), None, Verdict(ok),
                    functools.partial(Location, "objects.yaml", i + 1, 1))
            for i, (o, ok) in enumerate(zip(objects, allowed))]


def test_check_decides_each_target_apart_and_gives_the_answer_of_every_claim_against_every_other(
) -> None:
    import random

    from fivespot.compiler.check.governance import field_governance

    rng = random.Random(1405)
    for _ in range(200):
        objects = [scap(f"s{i}", rng.choice(["spec.a", "spec.a.b", "spec.a.c", "spec.b"]),
                        target=rng.choice(["p1", "p2", "p3"]),
                        created=rng.choice([None, "2026-03-02T08:00:00Z", "2026-03-01T08:00:00Z"]))
                   for i in range(rng.randrange(1, 9))]
        checked = _checked(objects, [rng.random() > 0.2 for _ in objects])
        assert [v.allowed for v in field_governance(checked)] == _naive(checked)


def test_check_decides_only_the_contested_targets_and_gives_the_same_verdicts_as_deciding_all(
) -> None:
    import random

    from fivespot.compiler.check.governance import field_governance, governed

    rng = random.Random(1406)
    for _ in range(300):
        objects = [scap(f"s{rng.randrange(6)}", rng.choice(["spec.a", "spec.a.b", "spec.b"]),
                        target=rng.choice(["p1", "p2", "p3", "p4", "p5"]),
                        created=rng.choice([None, "2026-03-02T08:00:00Z", "2026-03-01T08:00:00Z"]))
                   for _ in range(rng.randrange(1, 9))]
        checked = _checked(objects, [rng.random() > 0.2 for _ in objects])
        every = {item.claim.key for item in checked if item.claim is not None}
        assert field_governance(checked) == governed(checked, every)


def test_check_over_thousands_of_objects_compares_each_only_with_those_on_its_own_target(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import fivespot.api.fieldgovernance as rule
    from fivespot.compiler.check.governance import field_governance

    calls = 0
    real = rule.overlaps

    def counted(a: Claim, b: Claim) -> bool:
        nonlocal calls
        calls += 1
        return real(a, b)

    monkeypatch.setattr(rule, "overlaps", counted)
    objects = [scap(f"s{i}", target=f"pool-{i // 2}") for i in range(4000)]  # pairs on 2,000 targets
    verdicts = field_governance(_checked(objects, [True] * len(objects)))
    assert sum(not v.allowed for v in verdicts) == 2000
    assert calls <= 10 * len(objects)


# --- the governors fivespot does not run -------------------------------------------------------


def hpa(name: str = "sandboxes-hpa", *, target: str = "sandboxes",
        api_version: str = "pools.agents.example.com/v1alpha1") -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": "agents"},
            "spec": {"scaleTargetRef": {"apiVersion": api_version, "kind": "VirtualMachinePool",
                                        "name": target},
                     "minReplicas": 1, "maxReplicas": 5}}


def test_check_denies_a_scheduled_capacity_on_an_object_an_hpa_in_the_set_scales(
        out_dir: Any, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    autoscaler = _file(tmp_path / "hpa.yaml", hpa())
    objects = _file(tmp_path / "scaps.yaml", _file_scap("office-hours"),
                    _file_scap("elsewhere", target="other-pool"))
    code, found = _check(capsys, objects, autoscaler, "--policies", out_dir)
    assert code == 1 and found["elsewhere"]["allowed"]
    denied = found["office-hours"]
    assert not denied["allowed"]
    [violation] = [v for v in denied["violations"] if v["source"] == "webhook"]
    assert violation["message"] == (
        "field-governance: spec.warmReplicas of VirtualMachinePool.pools.agents.example.com "
        "agents/sandboxes is scaled by HorizontalPodAutoscaler.autoscaling agents/sandboxes-hpa "
        "(it writes the object's scale subresource), and a field has one governor: the two would "
        "overwrite each other. Gate its spec.minReplicas instead (point spec.targetRef at "
        "HorizontalPodAutoscaler.autoscaling agents/sandboxes-hpa and spec.capacity.path at "
        f"spec.minReplicas), or remove the autoscaler. HorizontalPodAutoscaler.autoscaling "
        f"agents/sandboxes-hpa is defined at {autoscaler}:4:3")


def test_a_keda_scaled_object_is_a_governor_too_and_names_min_replica_count() -> None:
    from fivespot.api.fieldgovernance import autoscaled_message, writer_of, written_by

    scaled = {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
              "metadata": {"name": "web", "namespace": "shop"},
              "spec": {"scaleTargetRef": {"name": "web"}, "minReplicaCount": 0}}
    writer = writer_of(scaled)
    gated = Claim("shop", "office-hours", "apps/v1", "Deployment", "web", "spec.replicas")
    assert writer is not None and written_by(gated, writer) == "spec.replicas"
    assert "Gate its spec.minReplicaCount instead" in autoscaled_message(gated, writer)
    other = Claim("shop", "paused", "apps/v1", "Deployment", "web", "spec.paused")
    assert written_by(other, writer) is None


def test_check_warns_when_a_manifest_in_the_set_sets_the_gated_field_with_the_fix(
        out_dir: Any, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    spec: dict[str, Any] = {"warmReplicas": 0, "template": {"cpu": 2}}
    pool = {"apiVersion": "pools.agents.example.com/v1alpha1", "kind": "VirtualMachinePool",
            "metadata": {"name": "sandboxes", "namespace": "agents"}, "spec": spec}
    manifest = _file(tmp_path / "pool.yaml", pool)
    objects = _file(tmp_path / "scap.yaml", _file_scap("office-hours"))
    code, found = _check(capsys, objects, manifest, "--policies", out_dir)
    assert code == 0 and found["office-hours"]["allowed"]
    [warning] = found["office-hours"]["warnings"]
    assert warning.startswith(
        "field-governance: VirtualMachinePool.pools.agents.example.com agents/sandboxes sets "
        "spec.warmReplicas, which ScheduledCapacity agents/office-hours governs")
    assert "Take the field out of the manifest in git" in warning
    assert "RespectIgnoreDifferences=true" in warning and warning.endswith(f"defined at {manifest}:4:3")
    spec.pop("warmReplicas")
    _file(tmp_path / "pool.yaml", pool)
    code, found = _check(capsys, objects, manifest, "--policies", out_dir)
    assert code == 0 and found["office-hours"]["warnings"] == []


def test_the_webhook_denies_a_scheduled_capacity_on_an_object_an_hpa_scales_in_the_words_of_check(
) -> None:
    from fivespot.api.fieldgovernance import autoscaled_message, writer_of

    listed = {"agents": [{k: v for k, v in hpa().items() if k not in ("apiVersion", "kind")}
                         | {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler"}]}
    answer = review_field_governance(_create(scap("office-hours")), existing(),
                                     autoscalers=lambda ns: listed.get(ns, []))
    assert not answer.allowed and answer.code == 403
    writer = writer_of(hpa())
    assert writer is not None
    assert answer.message == autoscaled_message(claim("office-hours"), writer)
    elsewhere = review_field_governance(_create(scap("office-hours", target="other-pool")), existing(),
                                        autoscalers=lambda ns: listed.get(ns, []))
    assert elsewhere.allowed


def test_the_webhook_admits_when_the_autoscalers_cannot_be_listed_the_controller_is_the_backstop(
) -> None:
    def failing(namespace: str) -> list[dict[str, Any]]:
        raise RuntimeError("forbidden")

    assert review_field_governance(_create(scap("office-hours")), existing(), autoscalers=failing).allowed


def test_an_update_keeping_target_and_path_is_not_denied_for_an_hpa() -> None:
    before = scap("office-hours")
    after = {**before, "spec": {**before["spec"], "enabled": False}}
    answer = review_field_governance(request(after, operation="UPDATE", old=before), existing(),
                                     autoscalers=lambda ns: [hpa()])
    assert answer.allowed


def test_check_only_warns_of_an_hpa_on_an_update_that_keeps_target_and_path_as_at_admission(
        out_dir: Any, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    stored = _file_scap("office-hours")
    edited = {**stored, "spec": {**stored["spec"], "enabled": False}}
    new = _file(tmp_path / "new.yaml", edited, hpa())
    old = _file(tmp_path / "old.yaml", stored)
    code, found = _check(capsys, new, "--old", old, "--policies", out_dir)
    assert code == 0 and found["office-hours"]["operation"] == "UPDATE"
    [warning] = found["office-hours"]["warnings"]
    assert "is scaled by HorizontalPodAutoscaler.autoscaling agents/sandboxes-hpa" in warning
    assert warning.endswith("this object writes nothing while the autoscaler scales the field")


def test_only_a_built_in_scalable_kind_gated_on_its_replicas_alone_is_written_through_scale() -> None:
    for kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        assert through_scale("apps", kind, ["spec.replicas"])
    assert not through_scale("apps", "Deployment", ["spec.replicas", "spec.minReadySeconds"])
    assert not through_scale("apps", "Deployment", ["spec.minReadySeconds"])
    assert not through_scale("apps", "DaemonSet", ["spec.replicas"])
    assert not through_scale("cluster.x-k8s.io", "MachineDeployment", ["spec.replicas"])
