"""KindWatches: a kind is watched once discovery serves it, dropped when it stops being served
(its CRD deleted, its version removed: the informer was answered 404), and watched again when
it comes back; every change of resolution is reported so dependents are re-queued."""

from __future__ import annotations

from typing import Any

import pytest

from fivespot.runtime import kube
from fivespot.runtime.kindwatches import NOT_SERVED, KindWatches
from fivespot.runtime.kube import ResolvedKind

pytestmark = pytest.mark.unit

GROUP = "spotschedules.5spot.finos.org"
V1 = ResolvedKind(GROUP, "v1alpha1", "ManualSchedule", "manualschedules", True)
V2 = ResolvedKind(GROUP, "v1", "ManualSchedule", "manualschedules", True)


class FakeInformer:
    def __init__(self, resolved: ResolvedKind):
        self.resolved = resolved
        self.started = self.stopped = False
        self.not_found: list[Any] = []

    def add_handler(self, handler: Any) -> None:
        pass

    def add_not_found_handler(self, handler: Any) -> None:
        self.not_found.append(handler)

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        self.stopped = True

    def wait_synced(self, timeout: float | None = None) -> bool:
        return True

    def answer_404(self) -> None:
        for handler in self.not_found:
            handler()


class Discovery:
    """What `kube.resolve_kind` answers, changed by the test."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, served: ResolvedKind | None):
        self.served = served
        monkeypatch.setattr(kube, "resolve_kind", lambda api, group, kind: self.served)


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> tuple[KindWatches, Discovery, list[FakeInformer], list[Any]]:
    made: list[FakeInformer] = []
    changes: list[Any] = []

    def make(resolved: ResolvedKind) -> FakeInformer:
        made.append(FakeInformer(resolved))
        return made[-1]

    discovery = Discovery(monkeypatch, V1)
    watches = KindWatches(None, make, lambda *a: None, on_change=changes.append)  # type: ignore[arg-type]
    watches.want(GROUP, "ManualSchedule")
    return watches, discovery, made, changes


def test_a_served_kind_is_watched_and_its_dependents_told(world: Any) -> None:
    watches, _, made, changes = world
    watches.resolve_now()
    watched = watches.get(GROUP, "ManualSchedule")
    assert watched.informer is made[0] and made[0].started and watched.resolved == V1
    assert changes == [(GROUP, "ManualSchedule")]
    watches.resolve_now()  # nothing to do: one informer, one notice
    assert len(made) == 1 and len(changes) == 1


def test_a_kind_whose_crd_is_deleted_is_dropped_and_unresolved_then_watched_again(world: Any) -> None:
    watches, discovery, made, changes = world
    watches.resolve_now()
    discovery.served = None
    made[0].answer_404()
    watches.resolve_now()
    watched = watches.get(GROUP, "ManualSchedule")
    assert made[0].stopped and watched.informer is None and watched.resolved is None
    assert watched.last_error == NOT_SERVED and not watched.suspect
    assert changes == [(GROUP, "ManualSchedule")] * 2
    watches.resolve_now()  # still not served: nothing new
    assert len(made) == 1 and len(changes) == 2
    discovery.served = V1
    watches.resolve_now()
    assert watches.get(GROUP, "ManualSchedule").informer is made[1] and made[1].started
    assert len(changes) == 3


def test_a_404_while_discovery_still_serves_the_kind_keeps_the_watch(world: Any) -> None:
    watches, _, made, changes = world
    watches.resolve_now()
    made[0].answer_404()
    watches.resolve_now()
    watched = watches.get(GROUP, "ManualSchedule")
    assert watched.informer is made[0] and not made[0].stopped and not watched.suspect
    assert len(changes) == 1


def test_a_kind_served_in_a_new_version_is_watched_in_that_version(world: Any) -> None:
    watches, discovery, made, changes = world
    watches.resolve_now()
    discovery.served = V2
    made[0].answer_404()
    watches.resolve_now()
    assert made[0].stopped and made[1].resolved == V2
    assert watches.get(GROUP, "ManualSchedule").informer is made[1]
    assert len(changes) == 2  # once, when the new version's cache had synced


def test_a_kind_that_stays_unserved_is_looked_up_less_and_less_often_up_to_once_a_minute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The resolver's loop (`due_only`) backs off: 5 s, 10 s, 20 s, 40 s, then every 60 s, so a
    kind the cluster never installs (KEDA's ScaledObject without KEDA) costs one discovery
    request a minute; once served, it is watched at the next retry."""
    now = [1000.0]
    monkeypatch.setattr("fivespot.runtime.kindwatches.time.monotonic", lambda: now[0])
    lookups: list[float] = []
    served: list[ResolvedKind | None] = [None]

    def resolve(api: Any, group: str, kind: str) -> ResolvedKind | None:
        lookups.append(now[0])
        return served[0]

    monkeypatch.setattr(kube, "resolve_kind", resolve)
    made: list[FakeInformer] = []

    def make(resolved: ResolvedKind) -> FakeInformer:
        made.append(FakeInformer(resolved))
        return made[-1]

    watches = KindWatches(None, make, lambda *a: None)  # type: ignore[arg-type]
    watches.want(GROUP, "ManualSchedule")
    for _ in range(400):  # 400 s of the loop, waking every second
        watches.resolve_now(due_only=True)
        now[0] += 1.0
    gaps = [round(b - a) for a, b in zip(lookups, lookups[1:])]
    assert gaps[:5] == [5, 10, 20, 40, 60] and set(gaps[4:]) == {60}
    served[0] = V1
    next_due = watches.resolve_now(due_only=True)
    assert not made and next_due is not None
    now[0] = next_due
    assert watches.resolve_now(due_only=True) is None
    assert made and made[0].started
