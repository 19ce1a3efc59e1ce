"""The Manager's contract: a reconciler is handed a Request only for a partition this replica
leads, and every write goes out through the one conditional writer with its precondition —
never once the partition is no longer ours."""

from __future__ import annotations

import contextlib
import copy
from typing import cast

import pytest

from fivespot.api.bundle import Bundle
from fivespot.runtime import kube
from fivespot.runtime.kube import ApiClient
from fivespot.runtime.manager import Manager, Primary, Settings
from fivespot.runtime.partitions import Partitions
from fivespot.runtime.reconcile import Request, Result
from fivespot.runtime.writes import Writes
from tests.unit.fakeapi import FakeApiServer

KIND = Primary("example.com", "v1", "things")
PARTITIONS = Partitions.from_pairs([("desk", ["trading"]), ("default", [])])


class Recorder:
    def __init__(self) -> None:
        self.requests: list[Request] = []

    def reconcile(self, request: Request) -> Result | None:
        self.requests.append(request)
        return None


BOOK = "/apis/example.com/v1/namespaces/trading/things/book"
MACHINE = "/apis/cluster.x-k8s.io/v1beta1/namespaces/trading/machines/m"
POD = "/api/v1/namespaces/apps/pods/web-0"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> FakeApiServer:
    fake = FakeApiServer()
    fake.put(BOOK, {"metadata": {"name": "book", "namespace": "trading"}, "spec": {}})
    fake.put(MACHINE, {"metadata": {"name": "m", "namespace": "trading", "uid": "u-1"}})
    monkeypatch.setattr(kube, "request", fake.request)
    return fake


def _writes(may_act: bool = True) -> Writes:
    return Writes(cast(ApiClient, None), "fivespot-unit",
                  lambda partition, held: contextlib.nullcontext(may_act))


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


def test_a_patch_carries_the_resource_version_its_decision_read(server: FakeApiServer) -> None:
    version = server.objects[BOOK]["metadata"]["resourceVersion"]
    _writes().patch("desk", BOOK, {"spec": {"replicas": 0}}, version, what="target")
    (call,) = server.sent
    assert call["method"] == "PATCH"
    assert call["body"] == {"spec": {"replicas": 0}, "metadata": {"resourceVersion": version}}
    assert call["query"] == {"fieldManager": "fivespot-unit"}
    assert call["content_type"] == kube.MERGE_PATCH
    assert server.objects[BOOK]["spec"] == {"replicas": 0}


def test_a_patch_decided_on_an_older_version_is_refused_and_changes_nothing(
        server: FakeApiServer) -> None:
    old = server.objects[BOOK]["metadata"]["resourceVersion"]
    server.put(BOOK, {**server.objects[BOOK], "spec": {"replicas": 3}})  # the new leader wrote
    with pytest.raises(kube.ApiError) as refused:
        _writes().patch("desk", BOOK, {"spec": {"replicas": 0}}, old, what="target")
    assert refused.value.conflict
    assert server.objects[BOOK]["spec"] == {"replicas": 3}


def test_a_delete_and_an_eviction_carry_the_uid_and_resource_version_observed(
        server: FakeApiServer) -> None:
    version = server.objects[MACHINE]["metadata"]["resourceVersion"]
    with pytest.raises(kube.ApiError) as replaced:
        _writes().delete("desk", MACHINE, "u-other", version, what="delete-machine")
    assert replaced.value.conflict and MACHINE in server.objects
    assert _writes().delete("desk", MACHINE, "u-1", version, what="delete-machine")
    assert MACHINE not in server.objects
    server.put(POD, {"metadata": {"name": "web-0", "namespace": "apps", "uid": "u-2"}})
    _writes().evict("desk", cast(ApiClient, None), "apps", "web-0", "u-2", "13")
    evict = server.sent[-1]
    assert evict["path"] == POD + "/eviction"
    assert evict["body"]["deleteOptions"]["preconditions"] == {"uid": "u-2",
                                                               "resourceVersion": "13"}


def test_a_create_of_what_exists_is_already_exists(server: FakeApiServer) -> None:
    with pytest.raises(kube.ApiError) as exists:
        _writes().create("desk", "/apis/example.com/v1/namespaces/trading/things",
                         {"metadata": {"name": "book"}}, what="thing")
    assert exists.value.conflict


def test_nothing_is_sent_once_the_partition_is_not_ours(server: FakeApiServer) -> None:
    writes = _writes(may_act=False)
    assert writes.patch("desk", BOOK, {}, "1", what="status") is None
    assert writes.create("desk", "/x", {}, what="policyreport") is None
    assert not writes.delete("desk", MACHINE, "u-1", "1", what="delete-machine")
    assert not writes.evict("desk", cast(ApiClient, None), "apps", "web-0", "u", "1")
    assert server.sent == []


def test_the_managers_status_write_is_conditional_and_not_sent_for_a_partition_it_lost(
        monkeypatch: pytest.MonkeyPatch, server: FakeApiServer) -> None:
    mgr, _ = _manager(monkeypatch, leading={"desk"})
    obj = copy.deepcopy(server.objects[BOOK])
    assert mgr.write("trading/book", obj, {"status": {"phase": "Active"}}) is None
    assert mgr.write("agents/pool", {**obj, "metadata": {**obj["metadata"], "namespace": "agents"}},
                     {"status": {"phase": "Active"}}) is None
    (call,) = server.sent
    assert call["path"] == BOOK + "/status"
    assert call["body"]["metadata"] == {"resourceVersion": obj["metadata"]["resourceVersion"]}
