"""The informer's pure parts: what watch events and relists do to the cache and which
notifications handlers get; stall detection; the reconnect backoff; line splitting."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from fivespot.runtime import kube
from fivespot.runtime.cache import ADDED, DELETED, MODIFIED, RESYNC, Cache
from fivespot.runtime.informer import (
    DEFAULT_RESYNC_S,
    Informer,
    handle_watch_event,
    is_stalled,
    iter_lines,
    reconnect_delay,
    resync_delay,
)


def obj(name: str, rv: str, ns: str = "ns", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "X",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": rv,
                         "managedFields": [{"manager": "kubectl"}]},
            "spec": spec}


def test_added_then_modified_then_deleted_reach_handlers_with_the_old_object() -> None:
    cache = Cache()
    first = handle_watch_event(cache, {"type": ADDED, "object": obj("a", "1", size=1)})
    assert first.delta is not None and first.delta.type == ADDED and first.delta.old is None
    assert first.resource_version == "1"
    second = handle_watch_event(cache, {"type": MODIFIED, "object": obj("a", "2", size=2)})
    assert second.delta is not None and second.delta.type == MODIFIED
    assert second.delta.old is not None and second.delta.old["spec"] == {"size": 1}
    third = handle_watch_event(cache, {"type": DELETED, "object": obj("a", "3", size=2)})
    assert third.delta is not None and third.delta.type == DELETED
    assert cache.get("ns/a") is None


def test_cached_objects_drop_managed_fields() -> None:
    cache = Cache()
    handle_watch_event(cache, {"type": ADDED, "object": obj("a", "1")})
    cached = cache.get("ns/a")
    assert cached is not None and "managedFields" not in cached["metadata"]


def test_an_event_repeating_the_cached_resource_version_is_not_news() -> None:
    cache = Cache()
    handle_watch_event(cache, {"type": ADDED, "object": obj("a", "1")})
    assert handle_watch_event(cache, {"type": MODIFIED, "object": obj("a", "1")}).delta is None


def test_a_bookmark_only_moves_the_resource_version() -> None:
    cache = Cache()
    step = handle_watch_event(cache, {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "77"}}})
    assert step.delta is None and step.resource_version == "77" and not step.gone


def test_a_410_error_event_means_relist_and_other_errors_are_reported() -> None:
    cache = Cache()
    gone = handle_watch_event(cache, {"type": "ERROR", "object": {"kind": "Status", "code": 410,
                                                                   "reason": "Expired"}})
    assert gone.gone
    other = handle_watch_event(cache, {"type": "ERROR", "object": {"code": 500, "message": "boom"}})
    assert not other.gone and other.error is not None and "boom" in other.error


def test_a_relist_notifies_exactly_what_changed_while_the_watch_was_gone() -> None:
    cache = Cache()
    cache.replace([obj("keep", "1"), obj("change", "1"), obj("vanish", "1")])
    deltas = cache.replace([obj("keep", "1"), obj("change", "2"), obj("new", "1")])
    seen = {(d.type, d.obj["metadata"]["name"]) for d in deltas}
    assert seen == {(MODIFIED, "change"), (ADDED, "new"), (DELETED, "vanish")}
    assert sorted(o["metadata"]["name"] for o in cache.list("ns")) == ["change", "keep", "new"]


def test_an_index_follows_adds_changes_and_deletes() -> None:
    cache = Cache()
    cache.add_index("size", lambda o: [str(o["spec"].get("size"))])
    handle_watch_event(cache, {"type": ADDED, "object": obj("a", "1", size=1)})
    handle_watch_event(cache, {"type": ADDED, "object": obj("b", "1", size=1)})
    assert [o["metadata"]["name"] for o in cache.by_index("size", "1")] == ["a", "b"]
    handle_watch_event(cache, {"type": MODIFIED, "object": obj("a", "2", size=2)})
    assert [o["metadata"]["name"] for o in cache.by_index("size", "1")] == ["b"]
    assert [o["metadata"]["name"] for o in cache.by_index("size", "2")] == ["a"]
    handle_watch_event(cache, {"type": DELETED, "object": obj("b", "3", size=1)})
    assert cache.by_index("size", "1") == []


def test_list_by_namespace_does_not_leak_a_namespace_sharing_a_prefix() -> None:
    cache = Cache()
    cache.replace([obj("a", "1", ns="team"), obj("b", "1", ns="team-2")])
    assert [o["metadata"]["name"] for o in cache.list("team")] == ["a"]


def test_a_watch_is_stalled_only_after_the_threshold_without_activity() -> None:
    assert not is_stalled(last_activity=100, now=249.9, stall_after_s=150)
    assert is_stalled(last_activity=100, now=250.1, stall_after_s=150)


def test_reconnect_delays_grow_with_jitter_and_are_capped() -> None:
    rng = random.Random(7)
    delays = [reconnect_delay(a, rng, base_s=0.5, max_s=30) for a in range(12)]
    for attempt, delay in enumerate(delays):
        ceiling = min(30, 0.5 * 2 ** attempt)
        assert ceiling / 2 <= delay <= ceiling
    assert len(set(delays)) == len(delays), "jittered, so replicas do not reconnect in lockstep"


def test_resync_periods_are_drawn_between_the_period_and_a_quarter_more() -> None:
    rng = random.Random(11)
    delays = [resync_delay(3600.0, rng) for _ in range(200)]
    assert all(3600.0 <= d < 4500.0 for d in delays)
    assert max(delays) - min(delays) > 600.0, "spread, so informers do not resync in lockstep"


class _CountedStop:
    """Stands in for the informer's stop event in its resync loop: records each wait and says
    "stopped" after `rounds` of them."""

    def __init__(self, rounds: int) -> None:
        self.waits: list[float] = []
        self.rounds = rounds

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None
        self.waits.append(timeout)
        return len(self.waits) > self.rounds


def test_the_backstop_resync_comes_once_an_hour_by_default_jittered_and_redelivers_the_cache(
) -> None:
    informer = Informer(None, "ex.com", "v1", "widgets")
    assert informer.resync_s == DEFAULT_RESYNC_S == 3600.0
    informer._cache.replace([obj("a", "1"), obj("b", "1")])
    informer._synced.set()
    seen: list[tuple[str, str]] = []
    informer.add_handler(lambda event, o, old: seen.append((event, o["metadata"]["name"])))
    stop = _CountedStop(rounds=3)
    informer._stop = stop  # type: ignore[assignment]
    informer._resync_loop()
    assert len(stop.waits) == 4
    assert all(3600.0 <= w < 4500.0 for w in stop.waits)
    assert len(set(stop.waits)) == len(stop.waits), "each period drawn anew"
    assert sorted(seen) == sorted([(RESYNC, "a"), (RESYNC, "b")] * 3)


def test_lines_split_across_chunks_are_reassembled() -> None:
    chunks = [b'{"a":', b'1}\n{"b"', b':2}\n\n', b'{"c":3}']
    assert list(iter_lines(chunks)) == [b'{"a":1}', b'{"b":2}', b'{"c":3}']


def test_a_list_answered_404_is_reported_to_the_not_found_handlers_and_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []

    def request(api: object, method: str, path: str, **kwargs: object) -> dict[str, object]:
        calls.append(path)
        raise kube.ApiError(404, "NotFound", "404 page not found")

    monkeypatch.setattr(kube, "request", request)
    told = threading.Event()
    informer = Informer(None, "ex.com", "v1", "widgets", resync_s=0)
    informer.add_not_found_handler(told.set)
    informer.start()
    try:
        assert told.wait(10)
        assert not informer.has_synced()
    finally:
        informer.stop()
    assert calls and calls[0] == "/apis/ex.com/v1/widgets"
