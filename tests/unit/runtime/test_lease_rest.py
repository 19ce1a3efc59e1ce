"""A lone holder rests (decision 0043): with no standby and no write for `idle_release_s` it
releases its lease and leads on without one; a write takes the lease again before it is sent;
a replica that took the free lease meanwhile ends the rest. The elector's loop is stepped by
hand here, on a manual clock, against the in-memory API server."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from fivespot.runtime import kube
from fivespot.runtime.leaderelection import (
    LEASE_GROUP,
    LEASE_VERSION,
    MAX_DUE,
    STANDBY,
    LeaderElector,
    Timing,
    rest_from,
)
from tests.unit.fakeapi import FakeApiServer
from tests.unit.runtime.test_workqueue import FakeClock

T = Timing(lease_duration_s=15, renew_deadline_s=10, retry_period_s=2, poll_s=0.5,
           solo_lease_duration_s=120, idle_release_s=10)
LEASE = kube.resource_path(LEASE_GROUP, LEASE_VERSION, "leases", "ns", "lease-p")


class World:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, timing: Timing = T) -> None:
        self.api = FakeApiServer()
        monkeypatch.setattr(kube, "request", self.api.request)
        self.clock = FakeClock()
        self.started: list[str] = []
        self.stopped: list[str] = []
        self.elector = LeaderElector(None, "ns", {"p": "lease-p"}, "me", timing=timing,
                                     clock=self.clock, watch=False,
                                     on_started_leading=self.started.append,
                                     on_stopped_leading=self.stopped.append)

        self.next_step = self.clock.t

    def step(self) -> float:
        wait = self.elector._step("p")
        self.next_step = self.clock.t + max(wait, 0.0)
        return wait

    def run_for(self, seconds: float) -> None:
        """The elector's loop for `seconds` of the clock: a step whenever the last one asked to
        be woken (as `LeaderElector._run` sleeps), the clock jumping in between."""
        until = self.clock.t + seconds
        while self.next_step <= until:
            self.clock.t = max(self.clock.t, self.next_step)
            if self.step() <= 0:
                self.next_step = self.clock.t + 0.001
        self.clock.t = until

    def lease_writes(self) -> int:
        return sum(1 for method, path in self.api.calls
                   if method in ("PUT", "POST") and path.startswith(LEASE.rsplit("/", 1)[0]))

    def holder(self) -> Any:
        return self.api.objects[LEASE]["spec"].get("holderIdentity")

    def taken_by(self, identity: str) -> None:
        """Another replica takes the lease (as it may once the holder released it)."""
        lease = self.api.objects[LEASE]
        self.api.put(LEASE, {**lease, "spec": {**lease["spec"], "holderIdentity": identity,
                                               "leaseDurationSeconds": 15}})


def leading(monkeypatch: pytest.MonkeyPatch, timing: Timing = T) -> World:
    world = World(monkeypatch, timing)
    world.step()
    assert world.elector.is_leading("p") and world.holder() == "me"
    return world


def resting(monkeypatch: pytest.MonkeyPatch) -> World:
    """A lone holder past its idle time: its lease released, leading on at rest."""
    world = leading(monkeypatch)
    world.run_for(11)
    assert world.holder() is None
    return world


def test_resting_starts_the_idle_time_after_the_last_write_and_not_while_one_is_in_flight() -> None:
    assert rest_from(T, active_at=100.0, peer_seen_at=None, in_flight=0) == 110.0
    assert rest_from(T, active_at=100.0, peer_seen_at=None, in_flight=1) is None
    assert rest_from(T, active_at=None, peer_seen_at=None, in_flight=0) is None
    assert rest_from(replace(T, idle_release_s=None), 100.0, None, 0) is None


def test_a_holder_a_standby_announced_itself_to_rests_only_a_solo_lease_after_the_announcement() -> None:
    assert rest_from(T, active_at=100.0, peer_seen_at=95.0, in_flight=0) == 215.0
    assert rest_from(replace(T, solo_lease_duration_s=None), 100.0, 95.0, 0) == 110.0


def test_an_idle_release_must_be_positive() -> None:
    with pytest.raises(ValueError, match="idle_release"):
        replace(T, idle_release_s=0)


def test_a_lone_holder_releases_its_lease_after_the_idle_time_and_writes_nothing_after(
        monkeypatch: pytest.MonkeyPatch) -> None:
    world = leading(monkeypatch)
    writes = world.lease_writes()
    world.run_for(9.5)
    assert world.holder() == "me" and world.lease_writes() == writes
    world.run_for(1.0)
    assert world.holder() is None, "released once idle for 10 s"
    assert world.elector.is_leading("p") and world.elector.holds("p"), "leads on at rest"
    released = world.lease_writes()
    assert released == writes + 1
    world.run_for(3600)
    assert world.lease_writes() == released, "an idle hour writes nothing"
    assert world.stopped == [] and world.started == ["p"]


def test_a_write_takes_the_resting_lease_again_before_it_is_sent_and_keeps_it_while_in_flight(
        monkeypatch: pytest.MonkeyPatch) -> None:
    world = resting(monkeypatch)
    before = world.lease_writes()
    with world.elector.writing("p") as may:
        assert may
        assert world.holder() == "me" and world.lease_writes() == before + 1
        world.run_for(60)  # the write hangs for a minute: renewed, never released
        assert world.holder() == "me"
    assert world.started == ["p"], "taking the lease again does not start leading afresh"
    world.run_for(9.5)
    assert world.holder() == "me"
    world.run_for(1.0)
    assert world.holder() is None, "released 10 s after the write ended"


def test_a_write_due_soon_after_the_idle_time_keeps_the_lease_through_it() -> None:
    assert rest_from(T, 100.0, None, 0, due_at=115.0) == 125.0, "due 5 s after the release"
    assert rest_from(T, 100.0, None, 0, due_at=105.0) == 115.0, "due before the release"
    assert rest_from(T, 100.0, None, 0, due_at=121.0) == 110.0, "due later: rest meanwhile"
    assert rest_from(T, 100.0, None, 1, due_at=115.0) is None


def test_taking_the_lease_back_ahead_must_leave_time_to_rest() -> None:
    with pytest.raises(ValueError, match="retake_ahead"):
        replace(T, retake_ahead_s=10)
    with pytest.raises(ValueError, match="retake_ahead"):
        replace(T, retake_ahead_s=-1)
    assert replace(T, idle_release_s=None, retake_ahead_s=30).retake_ahead_s == 30


def test_a_resting_holder_takes_its_lease_back_just_before_a_write_it_was_told_is_due(
        monkeypatch: pytest.MonkeyPatch) -> None:
    world = resting(monkeypatch)
    before = world.lease_writes()
    due = world.clock.now() + timedelta(seconds=600)
    world.elector.expect_write("p", due)
    world.step()  # woken by the new due write
    world.run_for(600 - T.retake_ahead_s - 0.1)
    assert world.holder() is None and world.lease_writes() == before, "rests until just before"
    world.run_for(0.2)
    assert world.holder() == "me" and world.lease_writes() == before + 1, "taken back ahead"
    world.run_for(T.retake_ahead_s - 0.1)
    assert world.clock.now() == due
    with world.elector.writing("p") as may:  # the due write itself waits for nothing
        assert may and world.lease_writes() == before + 1
    world.run_for(9.5)
    assert world.holder() == "me"
    world.run_for(1.0)
    assert world.holder() is None, "let go 10 s after the write, as after any spell"
    assert world.started == ["p"] and world.stopped == []


def test_a_due_write_that_never_comes_costs_one_retake_and_one_release(
        monkeypatch: pytest.MonkeyPatch) -> None:
    world = resting(monkeypatch)
    before = world.lease_writes()
    world.elector.expect_write("p", world.clock.now() + timedelta(seconds=30))
    world.step()
    world.run_for(30 + T.idle_release_s + 1)  # type: ignore[operator]
    assert world.holder() is None and world.lease_writes() == before + 2
    world.run_for(3600)
    assert world.lease_writes() == before + 2, "a passed due write is forgotten"


def test_a_holder_told_of_a_write_due_within_the_idle_time_does_not_let_its_lease_go(
        monkeypatch: pytest.MonkeyPatch) -> None:
    world = leading(monkeypatch)
    world.run_for(5)
    world.elector.expect_write("p", world.clock.now() + timedelta(seconds=8))
    writes = world.lease_writes()
    world.run_for(8)
    assert world.holder() == "me" and world.lease_writes() == writes, "held through the due write"
    with world.elector.writing("p") as may:
        assert may and world.lease_writes() == writes
    assert world.started == ["p"]


def test_due_writes_in_the_past_or_without_resting_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    world = leading(monkeypatch, replace(T, idle_release_s=None))
    world.elector.expect_write("p", world.clock.now() + timedelta(seconds=5))
    world.elector.expect_write("elsewhere", world.clock.now() + timedelta(seconds=5))
    assert world.elector._due_in("p") is None
    world = leading(monkeypatch)
    world.elector.expect_write("p", world.clock.now() - timedelta(seconds=5))
    assert world.elector._due_in("p") is None


def test_an_elector_remembers_the_earliest_due_writes_only(monkeypatch: pytest.MonkeyPatch) -> None:
    world = leading(monkeypatch)
    start = world.clock.now()
    for i in range(MAX_DUE + 10, 0, -1):
        world.elector.expect_write("p", start + timedelta(seconds=i))
    world.elector.expect_write("p", start + timedelta(seconds=1))
    due = world.elector._states["p"].due
    assert len(due) == MAX_DUE and min(due) == start + timedelta(seconds=1)


def test_a_replica_that_took_the_free_lease_ends_the_rest_and_the_write_is_not_sent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    world = resting(monkeypatch)
    world.taken_by("other")
    with world.elector.writing("p") as may:
        assert not may
    assert not world.elector.is_leading("p") and world.stopped == ["p"]
    assert world.holder() == "other"


def test_a_resting_replica_hears_of_a_new_holder_on_its_own_and_stops_leading(
        monkeypatch: pytest.MonkeyPatch) -> None:
    world = resting(monkeypatch)
    world.taken_by("other")
    world.run_for(T.lease_duration_s + 1)  # no watch here: read once a lease duration
    assert not world.elector.is_leading("p") and world.stopped == ["p"]
    assert world.holder() == "other"


def test_a_holder_a_standby_announced_itself_to_keeps_its_lease(
        monkeypatch: pytest.MonkeyPatch) -> None:
    world = leading(monkeypatch)
    lease = world.api.objects[LEASE]
    world.api.put(LEASE, {**lease, "metadata": {**lease["metadata"], "annotations": {
        STANDBY: "other 2026-12-06T00:00:00.000000Z"}}})
    world.elector._states["p"].reread = True
    world.run_for(60)
    assert world.holder() == "me" and world.elector.is_leading("p")
    assert world.api.objects[LEASE]["spec"]["leaseDurationSeconds"] == 15, "short, for the standby"


def test_without_an_idle_release_a_lone_holder_keeps_renewing(monkeypatch: pytest.MonkeyPatch) -> None:
    world = leading(monkeypatch, replace(T, idle_release_s=None))
    writes = world.lease_writes()
    world.run_for(400)
    assert world.holder() == "me"
    assert world.lease_writes() - writes == 10, "a 120 s solo lease renewed every 40 s (40 ... 400 s)"


def test_shutting_down_at_rest_stops_leading_and_writes_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    world = resting(monkeypatch)
    writes = world.lease_writes()
    world.elector.stop()
    assert world.stopped == ["p"] and not world.elector.is_leading("p")
    assert world.lease_writes() == writes
