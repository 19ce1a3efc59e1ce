"""A controller's own writes coming back on its watch: skipped only when the event is exactly the
object as the write left it, whichever of the answer and the event arrives first; and a
controller's connection pool sized to its workers."""

from __future__ import annotations

from pathlib import Path

from runtime.echoes import OwnWrites


def test_the_event_of_our_own_write_is_skipped_once_and_a_resync_of_it_is_not() -> None:
    own = OwnWrites()
    own.begin("ns/a")
    assert own.landed("ns/a", "17") is False
    assert own.is_echo("ns/a", "17") is True
    assert own.is_echo("ns/a", "17") is False  # the same version again: a relist or resync


def test_an_event_of_another_version_is_reconciled() -> None:
    own = OwnWrites()
    own.begin("ns/a")
    own.landed("ns/a", "17")
    assert own.is_echo("ns/a", "18") is False
    assert own.is_echo("ns/b", "17") is False


def test_our_event_arriving_before_the_answer_is_held_and_then_dropped() -> None:
    own = OwnWrites()
    own.begin("ns/a")
    assert own.is_echo("ns/a", "17") is True  # held while the write is in flight
    assert own.landed("ns/a", "17") is False  # it was ours: nothing to queue
    assert own.is_echo("ns/a", "17") is False


def test_a_foreign_event_during_the_write_is_handed_back_to_be_queued() -> None:
    own = OwnWrites()
    own.begin("ns/a")
    assert own.is_echo("ns/a", "16") is True
    assert own.is_echo("ns/a", "17") is True
    assert own.landed("ns/a", "17") is True


def test_a_failed_write_hands_back_whatever_arrived_meanwhile() -> None:
    own = OwnWrites()
    own.begin("ns/a")
    assert own.landed("ns/a", None) is False
    own.begin("ns/a")
    own.is_echo("ns/a", "20")
    assert own.landed("ns/a", None) is True
    assert own.is_echo("ns/a", "20") is False


def test_an_event_without_a_version_and_a_deleted_key_are_never_skipped() -> None:
    own = OwnWrites()
    assert own.is_echo("ns/a", None) is False
    own.begin("ns/a")
    own.landed("ns/a", "5")
    own.forget("ns/a")
    assert own.is_echo("ns/a", "5") is False


def test_a_controllers_connection_pool_has_one_connection_per_worker_and_room_for_its_watches(
    tmp_path: Path,
) -> None:
    from runtime import kube

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
