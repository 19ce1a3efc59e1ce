"""A controller's own writes (`fivespot.runtime.ownwrites`): an event that is exactly the object as our
write left it is skipped, whichever of the answer and the event arrives first; decisions rest on
the newer of the cache and our write; and a controller's connection pool is sized to its
workers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fivespot.runtime.ownwrites import OwnWrites, Seen


def at(version: str, **fields: Any) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": version}, **fields}


def test_the_event_of_our_own_write_is_skipped_once_and_a_resync_of_it_is_not() -> None:
    own = OwnWrites()
    own.begin("ns/a")
    assert own.landed("ns/a", at("17")) is False
    assert own.observe("ns/a", at("17")).seen is Seen.OWN
    assert own.observe("ns/a", at("17")).seen is Seen.NEW  # the same version again: a resync


def test_an_event_of_another_version_or_key_is_new() -> None:
    own = OwnWrites()
    own.begin("ns/a")
    own.landed("ns/a", at("17"))
    assert own.observe("ns/b", at("17")).seen is Seen.NEW
    assert own.observe("ns/a", at("16")).seen is Seen.NEW
    assert own.observe("ns/a", at("18")).seen is Seen.NEW, "newer: the cache caught up"
    assert own.current("ns/a", at("18")) == at("18")


def test_our_event_arriving_before_the_answer_is_held_and_then_dropped() -> None:
    own = OwnWrites()
    own.begin("ns/a")
    assert own.observe("ns/a", at("17")).seen is Seen.HELD
    assert own.landed("ns/a", at("17")) is False  # it was ours: nothing to queue
    assert own.observe("ns/a", at("17")).seen is Seen.NEW


def test_a_foreign_event_during_the_write_is_handed_back_to_be_queued() -> None:
    own = OwnWrites()
    own.begin("ns/a")
    assert own.observe("ns/a", at("16")).seen is Seen.HELD
    assert own.observe("ns/a", at("17")).seen is Seen.HELD
    assert own.landed("ns/a", at("17")) is True


def test_a_failed_write_hands_back_whatever_arrived_meanwhile() -> None:
    own = OwnWrites()
    own.begin("ns/a")
    assert own.landed("ns/a", None) is False
    own.begin("ns/a")
    own.observe("ns/a", at("20"))
    assert own.landed("ns/a", None) is True
    assert own.observe("ns/a", at("20")).seen is Seen.NEW


def test_an_event_without_a_version_and_a_deleted_key_are_never_skipped() -> None:
    own = OwnWrites()
    assert own.observe("ns/a", {"metadata": {}}).seen is Seen.NEW
    own.begin("ns/a")
    own.landed("ns/a", at("5"))
    own.observe("ns/a", at("5"), deleted=True)
    assert own.observe("ns/a", at("5")).seen is Seen.NEW


def test_a_decision_rests_on_the_newer_of_the_cache_and_our_own_last_write() -> None:
    own = OwnWrites()
    cached, ours, later = at("10", v=0), at("11", v=7), at("12", v=3)
    own.begin("t")
    own.landed("t", ours, "active")
    assert own.current("t", cached) is ours
    assert own.known("t", None) is ours, "a target written before its cache saw it at all"
    assert own.current("t", None) is None, "our write is no evidence a watched object exists"
    assert own.current("t", later) is later
    seen = own.observe("t", at("11"))
    assert (seen.seen, seen.tag) == (Seen.OWN, "active"), "the write's tag comes back with it"
    assert own.known("t", cached) is cached, "dropped once the watch delivered it"


def test_a_controllers_connection_pool_has_one_connection_per_worker_and_room_for_its_watches(
    tmp_path: Path,
) -> None:
    from fivespot.runtime import kube

    assert kube.pool_for(4) == kube.POOL_SIZE
    assert kube.pool_for(64) == 64 + kube.SPARE_CONNECTIONS
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n")
    api = kube.load_client(config, pool_size=kube.pool_for(64))
    try:
        assert api.configuration.connection_pool_maxsize == 80
    finally:
        api.close()
