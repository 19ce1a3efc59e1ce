"""The Manager's contract: a reconciler is handed a Request only for a partition this replica
leads, and every write goes out through the one conditional writer with its precondition —
never once the partition is no longer ours."""

from __future__ import annotations

from typing import Any, cast

import pytest

from api.bundle import Bundle
from runtime import kube
from runtime.kube import ApiClient
from runtime.manager import Manager, Primary, Settings
from runtime.partitions import Partitions
from runtime.reconcile import Request, Result
from runtime.writes import Writes

KIND = Primary("example.com", "v1", "things")
PARTITIONS = Partitions.from_pairs([("desk", ["trading"]), ("default", [])])


class Sent:
    """`kube.request` recording what would have gone to the API server."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, api: object, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        self.calls.append({"method": method, "path": path, **kwargs})
        return {"metadata": {"resourceVersion": "8"}}


class Recorder:
    def __init__(self) -> None:
        self.requests: list[Request] = []

    def reconcile(self, request: Request) -> Result | None:
        self.requests.append(request)
        return None


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Sent:
    recorded = Sent()
    monkeypatch.setattr(kube, "request", recorded)
    return recorded


def _manager(monkeypatch: pytest.MonkeyPatch, leading: set[str]) -> tuple[Manager, Recorder]:
    settings = Settings(bundle=cast(Bundle, None), identity="unit", namespace="fivespot",
                        partitions=PARTITIONS)
    mgr = Manager(cast(ApiClient, None), settings, component="fivespot-unit")
    recorder = Recorder()
    mgr.reconcile(KIND, recorder)
    monkeypatch.setattr(mgr.elector, "is_leading", lambda partition: partition in leading)
    monkeypatch.setattr(mgr.elector, "holds", lambda partition: partition in leading)
    return mgr, recorder


def test_a_reconciler_is_handed_a_request_only_for_a_partition_this_replica_leads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    mgr, recorder = _manager(monkeypatch, leading={"desk"})
    mgr.reconcile_key("trading/book")
    mgr.reconcile_key("agents/pool")  # the default partition: not ours
    mgr.reconcile_key("no-namespace")
    assert [(r.namespace, r.name, r.partition, r.key) for r in recorder.requests] == [
        ("trading", "book", "desk", "trading/book")]


def test_the_request_reads_the_current_object_only_when_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    mgr, recorder = _manager(monkeypatch, leading={"desk"})
    mgr.reconcile_key("trading/book")
    assert recorder.requests[0].current() is None  # not in the cache: gone


def test_a_patch_carries_the_resource_version_its_decision_read(sent: Sent) -> None:
    writes = Writes(cast(ApiClient, None), "fivespot-unit", lambda partition, held: True)
    writes.patch("desk", "/apis/example.com/v1/namespaces/trading/things/book",
                 {"spec": {"replicas": 0}}, "41", what="target")
    (call,) = sent.calls
    assert call["method"] == "PATCH"
    assert call["body"] == {"spec": {"replicas": 0}, "metadata": {"resourceVersion": "41"}}
    assert call["query"] == {"fieldManager": "fivespot-unit"}
    assert call["content_type"] == kube.MERGE_PATCH


def test_a_delete_and_an_eviction_carry_the_uid_and_resource_version_observed(sent: Sent) -> None:
    writes = Writes(cast(ApiClient, None), "fivespot-unit", lambda partition, held: True)
    writes.delete("desk", "/apis/cluster.x-k8s.io/v1beta1/namespaces/trading/machines/m", "u-1",
                  "12", what="delete-machine")
    writes.evict("desk", cast(ApiClient, None), "apps", "web-0", "u-2", "13")
    delete, evict = sent.calls
    assert delete["body"]["preconditions"] == {"uid": "u-1", "resourceVersion": "12"}
    assert evict["path"] == "/api/v1/namespaces/apps/pods/web-0/eviction"
    assert evict["body"]["deleteOptions"]["preconditions"] == {"uid": "u-2",
                                                               "resourceVersion": "13"}


def test_nothing_is_sent_once_the_partition_is_not_ours(sent: Sent) -> None:
    writes = Writes(cast(ApiClient, None), "fivespot-unit", lambda partition, held: False)
    assert writes.patch("desk", "/x", {}, "1", what="status") is None
    assert writes.create("desk", "/x", {}, what="policyreport") is None
    assert not writes.delete("desk", "/x", "u", "1", what="delete-machine")
    assert not writes.evict("desk", cast(ApiClient, None), "apps", "web-0", "u", "1")
    assert sent.calls == []


def test_the_managers_status_write_is_conditional_and_not_sent_for_a_partition_it_lost(
        monkeypatch: pytest.MonkeyPatch, sent: Sent) -> None:
    mgr, _ = _manager(monkeypatch, leading={"desk"})
    obj = {"metadata": {"name": "book", "namespace": "trading", "resourceVersion": "5"}}
    assert mgr.write("trading/book", obj, {"status": {"phase": "Active"}}) is None
    assert mgr.write("agents/pool", {**obj, "metadata": {**obj["metadata"], "namespace": "agents"}},
                     {"status": {"phase": "Active"}}) is None
    (call,) = sent.calls
    assert call["path"] == "/apis/example.com/v1/namespaces/trading/things/book/status"
    assert call["body"]["metadata"] == {"resourceVersion": "5"}
