"""The machine controller's decision table: one behaviour per test, on `decide` alone."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from fivespot.api.kinds.machine_lifecycle import MachinePhase, MachineSpec, MachineStatus
from fivespot.controllers.machine.decide import (
    CLEANUP_SLACK,
    NODE_DRAINED,
    READY,
    SPOT_SCHEDULE_RESOLVED,
    Cordon,
    Create,
    Decision,
    Delete,
    AddFinalizer,
    Evict,
    Part,
    Reason,
    decide,
)
from fivespot.controllers.machine.observations import (
    DecisionInput,
    Foreign,
    InvalidSpec,
    LookupFailed,
    NodeGone,
    NodeSeen,
    Owned,
    PodOnNode,
    RefusedKubeconfig,
    Resolved,
    Unresolved,
    UnresolvedReason,
    observe_node,
    observe_owned,
    parse_spec,
)

pytestmark = pytest.mark.unit

T0 = datetime(2026, 3, 2, 14, 0, tzinfo=timezone.utc)
SPEC: dict[str, Any] = {
    "schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "ManualSchedule",
                 "name": "desk"},
    "clusterName": "desk-cluster",
    "bootstrapSpec": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
                      "spec": {}},
    "infrastructureSpec": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                           "kind": "DevMachine", "spec": {}},
    "gracefulShutdownTimeout": "1m",
    "nodeDrainTimeout": "5m",
}
MACHINE = Owned("rack-1", "uid-m", node="node-1")
BOOT = Owned("rack-1-bootstrap", "uid-b")
INFRA = Owned("rack-1-infrastructure", "uid-i")


def given(**changes: Any) -> DecisionInput:
    spec = changes.pop("spec", {})
    base = DecisionInput(
        namespace="trading", name="rack-1", uid="uid-sm", generation=1,
        spec=spec if isinstance(spec, InvalidSpec) else MachineSpec.model_validate({**SPEC, **spec}),
        refusal=None,
        schedule=Resolved(True), provider_generation=1, prior=None, machine=None,
        bootstrap=None, infrastructure=None, node=None, now=T0, finalizer=True)
    return replace(base, **changes)


def then(inp: DecisionInput) -> Decision:
    """decide, observing the node when the decision asks for it (as the shell does)."""
    decision = decide(inp)
    assert not decision.needs_node, "the test must give the node"
    return decision


def status_of(decision: Decision) -> MachineStatus:
    return decision.status


def condition(decision: Decision, type_: str) -> tuple[str, str]:
    found = decision.status.condition(type_)
    assert found is not None
    return found.status.value, found.reason


def test_a_schedule_that_never_resolved_creates_nothing_and_says_why() -> None:
    decision = then(given(schedule=Unresolved(UnresolvedReason.NOT_FOUND, "no such object")))
    assert decision.actions == ()
    assert decision.status.phase is MachinePhase.INACTIVE
    assert condition(decision, SPOT_SCHEDULE_RESOLVED) == ("False", "ScheduleNotFound")
    assert decision.status.spot_schedule is not None and decision.status.spot_schedule.active is None
    assert decision.resolution_error == "ScheduleNotFound"


def test_an_active_schedule_creates_bootstrap_then_infrastructure_then_the_machine() -> None:
    decision = then(given())
    assert decision.actions == (Create(Part.BOOTSTRAP), Create(Part.INFRASTRUCTURE),
                                Create(Part.MACHINE))
    assert decision.status.phase is MachinePhase.PENDING
    assert decision.status.in_schedule


def test_a_machine_with_a_node_is_active_and_its_node_is_reported() -> None:
    decision = then(given(machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA))
    assert decision.actions == ()
    assert decision.status.phase is MachinePhase.ACTIVE
    assert decision.status.node_ref is not None and decision.status.node_ref.name == "node-1"
    assert condition(decision, READY) == ("True", "InSchedule")
    assert decision.status.machine_ref is not None and decision.status.machine_ref.uid == "uid-m"


def test_an_unchanged_world_decides_an_equal_status() -> None:
    first = then(given(machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA))
    again = then(given(machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA, prior=first.status,
                       now=T0 + timedelta(minutes=3)))
    assert again.status == first.status and again.events == ()


def active_prior() -> MachineStatus:
    return then(given(machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA)).status


def test_a_closed_schedule_waits_the_grace_period_before_touching_the_node() -> None:
    decision = then(given(schedule=Resolved(False), prior=active_prior(), machine=MACHINE,
                          bootstrap=BOOT, infrastructure=INFRA))
    assert decision.actions == ()
    assert decision.status.phase is MachinePhase.SHUTTING_DOWN
    assert decision.status.shutdown_started_at == T0
    assert decision.requeue_at == T0 + timedelta(minutes=1)
    assert [e.reason for e in decision.events] == ["ShutdownStarted"]


def shutting_down(after: timedelta, node: Any = None, prior: MachineStatus | None = None) -> Decision:
    prior = prior or then(given(schedule=Resolved(False), prior=active_prior(), machine=MACHINE,
                                bootstrap=BOOT, infrastructure=INFRA)).status
    inp = given(schedule=Resolved(False), prior=prior, machine=MACHINE, bootstrap=BOOT,
                infrastructure=INFRA, now=T0 + after)
    first = decide(inp)
    if not first.needs_node:
        return first
    return decide(replace(inp, node=node))


def test_after_the_grace_period_the_node_is_cordoned_and_its_pods_evicted() -> None:
    pods = (PodOnNode("apps", "web-1"), PodOnNode("apps", "web-2", terminating=True))
    node = NodeSeen("node-1", cordoned=False, tainted=False, pods=pods)
    decision = shutting_down(timedelta(minutes=1), node)
    assert decision.actions == (Cordon("node-1"), Evict((PodOnNode("apps", "web-1"),)))
    assert decision.status.drain_started_at == T0 + timedelta(minutes=1)
    assert condition(decision, NODE_DRAINED) == ("False", "Draining")
    assert "DrainStarted" in [e.reason for e in decision.events]


def test_a_node_is_cordoned_before_its_emptiness_counts_as_drained() -> None:
    empty = NodeSeen("node-1", cordoned=False, tainted=False, pods=())
    decision = shutting_down(timedelta(minutes=2), empty)
    assert decision.actions == (Cordon("node-1"),)
    assert decision.requeue_at == T0 + timedelta(minutes=2, seconds=1)


def test_a_drained_node_gets_its_machine_deleted() -> None:
    node = NodeSeen("node-1", cordoned=True, tainted=True, pods=())
    decision = shutting_down(timedelta(minutes=2), node)
    assert decision.actions == (Delete(Part.MACHINE),)
    assert condition(decision, NODE_DRAINED) == ("True", "Drained")


def test_a_pod_a_budget_keeps_delays_deletion_until_the_drain_timeout() -> None:
    blocked = NodeSeen("node-1", cordoned=True, tainted=True, pods=(PodOnNode("apps", "db-0"),))
    draining = shutting_down(timedelta(minutes=1), blocked)
    assert Delete(Part.MACHINE) not in draining.actions
    later = shutting_down(timedelta(minutes=5, seconds=59), blocked, prior=draining.status)
    assert later.actions == (Evict((PodOnNode("apps", "db-0"),)),)
    timed_out = shutting_down(timedelta(minutes=6), blocked, prior=draining.status)
    assert timed_out.actions == (Delete(Part.MACHINE),)
    assert condition(timed_out, NODE_DRAINED) == ("False", "DrainTimedOut")
    assert [e.type for e in timed_out.events] == ["Warning"]


def test_an_unreachable_workload_cluster_is_retried_then_the_machine_deleted_at_the_timeout() -> None:
    unreachable = LookupFailed("connection refused")
    draining = shutting_down(timedelta(minutes=1), unreachable)
    assert draining.actions == () and draining.status.drain_started_at is not None
    late = shutting_down(timedelta(minutes=6), unreachable, prior=draining.status)
    assert late.actions == (Delete(Part.MACHINE),)


def test_a_refused_kubeconfig_is_reported_with_one_warning_and_the_machine_deleted_at_the_timeout(
        ) -> None:
    refused = RefusedKubeconfig("Secret trading/desk-cluster-kubeconfig: the kubeconfig is "
                                "refused: users[0].user.exec: an exec credential plugin runs a "
                                "command in the controller")
    draining = shutting_down(timedelta(minutes=1), refused)
    assert draining.actions == () and draining.status.drain_started_at is not None
    assert condition(draining, NODE_DRAINED) == ("False", "KubeconfigRefused")
    assert condition(draining, READY) == ("False", "ScheduleInactive")
    drained = draining.status.condition(NODE_DRAINED)
    assert drained is not None and refused.message in drained.message
    assert "Nothing is sent to the workload cluster until the Secret is fixed" in drained.message
    warnings = [e for e in draining.events if e.type == "Warning"]
    assert [e.reason for e in warnings] == ["KubeconfigRefused"]
    assert "users[0].user.exec" in warnings[0].message
    assert draining.requeue_at == T0 + timedelta(minutes=1, seconds=5)
    again = shutting_down(timedelta(minutes=2), refused, prior=draining.status)
    assert again.actions == () and again.events == (), "one Warning per refusal, not per retry"
    other = RefusedKubeconfig("Secret trading/desk-cluster-kubeconfig: the kubeconfig is refused: "
                              "users[0].user.tokenFile: reads a file")
    changed = shutting_down(timedelta(minutes=3), other, prior=again.status)
    assert [e.reason for e in changed.events] == ["KubeconfigRefused"]
    late = shutting_down(timedelta(minutes=6), refused, prior=changed.status)
    assert late.actions == (Delete(Part.MACHINE),)
    assert condition(late, NODE_DRAINED) == ("False", "KubeconfigRefused")
    assert [e.reason for e in late.events] == ["DrainTimedOut"]


def test_once_the_machine_is_gone_its_objects_are_deleted_then_it_is_inactive() -> None:
    prior = shutting_down(timedelta(minutes=2), NodeGone()).status
    cleanup = then(given(schedule=Resolved(False), prior=prior, bootstrap=BOOT,
                         infrastructure=INFRA, now=T0 + timedelta(minutes=3)))
    assert cleanup.actions == (Delete(Part.BOOTSTRAP), Delete(Part.INFRASTRUCTURE))
    done = then(given(schedule=Resolved(False), prior=cleanup.status,
                      now=T0 + timedelta(minutes=4)))
    assert done.actions == () and done.status.phase is MachinePhase.INACTIVE
    assert done.status.node_ref is None and done.status.machine_ref is None
    assert done.status.shutdown_started_at is None


def test_the_kill_switch_deletes_the_machine_at_once_and_says_so_loudly() -> None:
    decision = then(given(spec={"killSwitch": True}, prior=active_prior(), machine=MACHINE,
                          bootstrap=BOOT, infrastructure=INFRA))
    assert decision.actions == (Delete(Part.MACHINE),)
    assert decision.status.phase is MachinePhase.TERMINATED
    assert [(e.type, e.reason) for e in decision.events] == [("Warning", "KillSwitch")]


def test_disabled_takes_the_same_safe_path_and_ends_disabled() -> None:
    decision = then(given(spec={"enabled": False}, prior=active_prior(), machine=MACHINE,
                          bootstrap=BOOT, infrastructure=INFRA))
    assert decision.actions == () and decision.status.phase is MachinePhase.SHUTTING_DOWN
    gone = then(given(spec={"enabled": False}, prior=decision.status))
    assert gone.status.phase is MachinePhase.DISABLED


def test_an_unresolved_provider_holds_the_last_answer() -> None:
    decision = then(given(schedule=Unresolved(UnresolvedReason.NOT_READY, "Ready=False"),
                          prior=active_prior(), machine=MACHINE, bootstrap=BOOT,
                          infrastructure=INFRA))
    assert decision.actions == () and decision.status.phase is MachinePhase.ACTIVE
    assert condition(decision, SPOT_SCHEDULE_RESOLVED) == ("False", "ScheduleNotReady")


def test_a_reopen_during_the_grace_period_cancels_the_shutdown() -> None:
    grace = shutting_down(timedelta(seconds=10))
    reopened = then(given(prior=grace.status, machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA,
                          now=T0 + timedelta(seconds=20)))
    assert reopened.actions == () and reopened.status.phase is MachinePhase.ACTIVE
    assert reopened.status.shutdown_started_at is None
    assert "ShutdownCancelled" in [e.reason for e in reopened.events]


def test_a_reopen_after_the_drain_began_finishes_the_removal_first() -> None:
    node = NodeSeen("node-1", cordoned=True, tainted=True, pods=(PodOnNode("apps", "a"),))
    draining = shutting_down(timedelta(minutes=1), node)
    inp = given(prior=draining.status, machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA,
                now=T0 + timedelta(minutes=2))
    reopened = decide(replace(inp, node=node))
    assert reopened.status.phase is MachinePhase.SHUTTING_DOWN
    assert Create(Part.MACHINE) not in reopened.actions


def test_an_object_this_machine_does_not_own_is_never_touched() -> None:
    decision = then(given(machine=Foreign("rack-1"), schedule=Resolved(False)))
    assert decision.actions == () and decision.status.phase is MachinePhase.ERROR


def test_a_cluster_the_platform_does_not_allow_is_refused() -> None:
    decision = then(given(refusal="cluster other is not declared"))
    assert decision.actions == () and decision.status.phase is MachinePhase.ERROR


def test_a_transient_read_of_the_machine_changes_nothing() -> None:
    decision = then(given(machine=LookupFailed("timeout"), prior=active_prior()))
    assert decision.actions == () and decision.transient is not None
    assert decision.status == active_prior()


def test_the_drain_skips_daemonset_and_mirror_pods_like_kubectl_drain() -> None:
    def pod(name: str, **meta: Any) -> dict[str, Any]:
        return {"metadata": {"namespace": "apps", "name": name, **meta}}

    seen = observe_node({"metadata": {"name": "n"}, "spec": {"unschedulable": True}}, [
        pod("web"),
        pod("ds", ownerReferences=[{"kind": "DaemonSet", "controller": True, "name": "x", "uid": "u"}]),
        pod("static", annotations={"kubernetes.io/config.mirror": "abc"}),
        pod("going", deletionTimestamp="2026-03-02T14:00:00Z"),
    ])
    assert isinstance(seen, NodeSeen) and seen.cordoned and not seen.tainted
    assert seen.pods == (PodOnNode("apps", "going", True), PodOnNode("apps", "web"))


def test_ownership_is_judged_by_owner_uid() -> None:
    obj = {"metadata": {"name": "m", "uid": "u1", "ownerReferences": [{"uid": "uid-sm"}]},
           "status": {"nodeRef": {"name": "node-9"}}}
    assert observe_owned(obj, "uid-sm") == Owned("m", "u1", node="node-9")
    assert observe_owned(obj, "someone-else") == Foreign("m")
    assert observe_owned(None, "uid-sm") is None


def test_embedded_objects_cannot_choose_their_name_or_namespace() -> None:
    bad = {**SPEC, "bootstrapSpec": {**SPEC["bootstrapSpec"], "metadata": {"name": "x"}}}
    parsed = parse_spec(bad)
    assert not isinstance(parsed, MachineSpec)
    assert any("metadata.name" in e for e in parsed.errors)


def test_a_create_the_api_server_refuses_is_reported_as_an_error_naming_the_field() -> None:
    from fivespot.controllers.machine.decide import action_failed

    decision = then(given())
    failed = action_failed(given(), decision, Create(Part.BOOTSTRAP),
                           "spec: Invalid value: 0: spec in body should have at least 1 properties")
    assert failed.actions == () and failed.status.phase is MachinePhase.ERROR
    assert condition(failed, READY) == ("False", "CreateRejected")
    assert "fix spec.bootstrapSpec" in failed.status.message
    assert [e.type for e in failed.events] == ["Warning"]
    again = action_failed(given(prior=failed.status), decision, Create(Part.BOOTSTRAP),
                          "spec: Invalid value: 0: spec in body should have at least 1 properties")
    assert again.events == ()


def test_a_provider_that_could_not_be_read_after_a_restart_deletes_nothing() -> None:
    """Found by the SIGKILL test: a restart's first reconcile, the provider kind still being
    resolved, objects created by the killed run and no status yet — must not read as 'never
    resolved' and clean them up."""
    decision = then(given(schedule=LookupFailed("resolving ManualSchedule: pending"),
                          bootstrap=BOOT, infrastructure=INFRA))
    assert decision.actions == () and decision.transient is not None


# --- the finalizer and deletion ------------------------------------------------------------------

DELETED_AT = T0 + timedelta(hours=1)
GRACE_AND_DRAIN = timedelta(minutes=6)  # SPEC: gracefulShutdownTimeout 1m + nodeDrainTimeout 5m
BLOCKED_NODE = NodeSeen("node-1", cordoned=True, tainted=True, pods=(PodOnNode("apps", "web"),))


def deleted(**changes: Any) -> DecisionInput:
    return given(deleting_since=DELETED_AT, **{"now": DELETED_AT, **changes})


def test_the_finalizer_is_added_before_anything_is_created() -> None:
    decision = then(given(finalizer=False))
    assert decision.actions == (AddFinalizer(), Create(Part.BOOTSTRAP), Create(Part.INFRASTRUCTURE),
                                Create(Part.MACHINE))


def test_the_finalizer_is_added_to_a_machine_that_predates_it_without_touching_it_otherwise() -> None:
    decision = then(given(finalizer=False, machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA))
    assert decision.actions == (AddFinalizer(),)
    assert decision.status.phase is MachinePhase.ACTIVE


def test_a_refused_object_gets_no_finalizer_since_nothing_is_created_for_it() -> None:
    refused = then(given(finalizer=False, refusal="spec.clusterName desk in namespace apps is not "
                         "a cluster"))
    invalid = then(given(finalizer=False, spec=parse_spec({**SPEC, "clusterName": 7})))
    for decision in (refused, invalid):
        assert decision.actions == () and decision.status.phase is MachinePhase.ERROR


def test_a_transient_lookup_adds_no_finalizer_and_changes_nothing() -> None:
    decision = then(given(finalizer=False, machine=LookupFailed("timeout")))
    assert decision.actions == () and decision.transient is not None


def test_a_deleted_active_machine_waits_out_its_grace_period_before_the_drain() -> None:
    decision = then(deleted(machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA))
    assert decision.actions == () and not decision.release
    assert decision.status.phase is MachinePhase.SHUTTING_DOWN
    assert condition(decision, READY) == ("False", Reason.DELETING)
    assert condition(decision, NODE_DRAINED) == ("False", "GracefulShutdown")
    assert decision.requeue_at == DELETED_AT + timedelta(minutes=1)


def test_a_deleted_machine_is_cordoned_and_drained_past_its_grace_period_even_in_schedule() -> None:
    grace = then(deleted(machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA))
    later = DELETED_AT + timedelta(minutes=1)
    draining = then(deleted(machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA, prior=grace.status,
                            now=later, node=NodeSeen("node-1", cordoned=False, tainted=False,
                                                     pods=(PodOnNode("apps", "web"),))))
    assert draining.actions == (Cordon("node-1"), Evict((PodOnNode("apps", "web"),)))
    assert not draining.release


def test_a_deleted_machine_whose_pods_are_blocked_by_a_budget_keeps_its_machine_until_the_drain_timeout() -> None:
    start = then(deleted(machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA))
    drain = then(deleted(machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA, prior=start.status,
                         now=DELETED_AT + timedelta(minutes=1), node=BLOCKED_NODE))
    still = then(deleted(machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA, prior=drain.status,
                         now=DELETED_AT + timedelta(minutes=4), node=BLOCKED_NODE))
    assert Delete(Part.MACHINE) not in still.actions and not still.release
    past = then(deleted(machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA, prior=still.status,
                        now=DELETED_AT + timedelta(minutes=6, seconds=1), node=BLOCKED_NODE))
    assert past.actions == (Delete(Part.MACHINE),) and not past.release


def test_a_drained_deleted_machine_is_deleted_then_its_objects_then_the_finalizer_goes() -> None:
    start = then(deleted(machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA))
    drained = then(deleted(machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA, prior=start.status,
                           now=DELETED_AT + timedelta(minutes=2), node=NodeGone()))
    assert drained.actions == (Delete(Part.MACHINE),)
    objects_left = then(deleted(bootstrap=BOOT, infrastructure=INFRA, prior=drained.status,
                                now=DELETED_AT + timedelta(minutes=3)))
    assert objects_left.actions == (Delete(Part.BOOTSTRAP), Delete(Part.INFRASTRUCTURE))
    assert not objects_left.release
    gone = then(deleted(prior=objects_left.status, now=DELETED_AT + timedelta(minutes=4)))
    assert gone.actions == () and gone.release
    assert Reason.DELETING in [e.reason for e in gone.events]


def test_a_deleted_machine_that_is_already_out_of_the_cluster_releases_at_once() -> None:
    decision = then(deleted(schedule=Resolved(False)))
    assert decision.actions == () and decision.release


def test_a_deleted_machine_under_the_kill_switch_skips_grace_and_drain() -> None:
    decision = then(deleted(spec={"killSwitch": True}, machine=MACHINE, bootstrap=BOOT,
                            infrastructure=INFRA))
    assert decision.actions == (Delete(Part.MACHINE),) and not decision.release
    gone = then(deleted(spec={"killSwitch": True}, prior=decision.status,
                        now=DELETED_AT + timedelta(seconds=5)))
    assert gone.release


def test_a_deleted_machine_never_deletes_an_object_it_does_not_own() -> None:
    decision = then(deleted(machine=Foreign("rack-1"), bootstrap=BOOT, infrastructure=INFRA))
    assert Delete(Part.MACHINE) not in decision.actions
    assert decision.actions == (Delete(Part.BOOTSTRAP), Delete(Part.INFRASTRUCTURE))


def test_a_deleted_machine_needs_no_schedule_answer() -> None:
    decision = then(deleted(schedule=LookupFailed("the cache has not synced"), machine=MACHINE,
                            bootstrap=BOOT, infrastructure=INFRA))
    assert decision.transient is None and decision.status.phase is MachinePhase.SHUTTING_DOWN


def test_a_cleanup_that_cannot_finish_is_reported_and_bounded() -> None:
    bound = DELETED_AT + GRACE_AND_DRAIN + CLEANUP_SLACK
    before = then(deleted(machine=Owned("rack-1", "uid-m", deleting=True, node="node-1"),
                          now=bound - timedelta(seconds=1), prior=active_prior()))
    assert not before.release and before.requeue_at is not None and before.requeue_at <= bound
    stuck = then(deleted(machine=Owned("rack-1", "uid-m", deleting=True, node="node-1"), now=bound,
                         prior=before.status))
    assert stuck.release and stuck.actions == ()
    assert condition(stuck, "Stalled") == ("True", Reason.CLEANUP_TIMED_OUT)
    warning = [e for e in stuck.events if e.reason == Reason.CLEANUP_TIMED_OUT]
    assert warning and warning[0].type == "Warning" and "machine rack-1" in warning[0].message


def test_a_deleted_machine_whose_spec_is_refused_is_released_with_a_warning() -> None:
    decision = then(deleted(refusal="cluster other is not declared", machine=MACHINE))
    assert decision.actions == () and decision.release
    assert [e.type for e in decision.events] == ["Warning"]


def test_a_deletion_without_the_finalizer_is_left_alone() -> None:
    decision = then(deleted(finalizer=False, machine=MACHINE, bootstrap=BOOT, infrastructure=INFRA))
    assert decision.actions == () and not decision.release
