"""The lease decision is a pure function of (lease as observed, me, now, leases held, when I last
renewed). The table covers acquire / renew / hold / stand by / lost, spreading, and the safety
property: a leader stops acting before any candidate can take over."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fivespot.runtime.leaderelection import (
    Action,
    LeaseView,
    Timing,
    decide,
    holdings,
    is_leading,
    lease_to_write,
    partition_to_ask_for,
    should_announce,
    should_hand_back,
)

T = Timing(lease_duration_s=15, renew_deadline_s=10, retry_period_s=2, poll_s=0.5, spread_s=1)
ME, OTHER = "me", "other"


def held_by(holder: str | None, observed_at: float = 100.0, duration: float = 15) -> LeaseView:
    return LeaseView(True, holder, duration, "rv1", observed_at)


ABSENT = LeaseView(False, None, 0, None, 100.0)


@dataclass(frozen=True)
class Row:
    why: str
    view: LeaseView
    now: float
    held: int
    renewed_at: float | None
    action: Action
    leading: bool
    at: float | None = None
    lease_s: float | None = None
    wanted_s: float | None = None


ROWS = [
    Row("no lease exists and I hold none: create it now", ABSENT, 100.0, 0, None, Action.ACQUIRE, False),
    Row("no lease exists but I hold one: wait one spread first", ABSENT, 100.5, 1, None,
        Action.STAND_BY, False, 101.0),
    Row("no lease exists and my spread wait is over: create it", ABSENT, 101.0, 1, None, Action.ACQUIRE, False),
    Row("another holder within its duration: stand by and poll", held_by(OTHER), 110.0, 0, None,
        Action.STAND_BY, False, 110.5),
    Row("another holder's lease expired by my observation: take it over", held_by(OTHER), 115.0, 0, None,
        Action.ACQUIRE, False),
    Row("an expired lease while I hold two others: wait two spreads", held_by(OTHER), 116.0, 2, None,
        Action.STAND_BY, False, 116.5),
    Row("an expired lease after my two spreads: take it over", held_by(OTHER), 117.0, 2, None,
        Action.ACQUIRE, False),
    Row("a released lease is free at once for a replica holding none", held_by(None), 100.0, 0, None,
        Action.ACQUIRE, False),
    Row("I lead and renewal is not yet due: hold until a third of the lease has passed",
        held_by(ME), 101.0, 0, 100.0, Action.HOLD, True, 105.0),
    Row("I lead and renewal is due: renew, still leading", held_by(ME), 105.0, 0, 100.0, Action.RENEW, True),
    Row("a failed renewal is retried at once: still due, still leading", held_by(ME), 107.5, 0, 100.0,
        Action.RENEW, True),
    Row("I lead a solo lease: renewal is due after a third of it", held_by(ME, duration=120), 120.0, 0,
        100.0, Action.HOLD, True, 140.0, lease_s=120),
    Row("I lead a solo lease and a standby announced itself: renew short leases soon",
        held_by(ME, duration=120), 101.0, 0, 100.0, Action.HOLD, True, 102.0, lease_s=120, wanted_s=15),
    Row("a solo lease still lets me act past the short renew deadline", held_by(ME, duration=120), 130.0, 0,
        100.0, Action.HOLD, True, 140.0, lease_s=120),
    Row("a solo lease's deadline is its duration less the same margin", held_by(ME, duration=120), 215.0, 0,
        100.0, Action.LOST, False, lease_s=120),
    Row("another's solo lease: stand by for all of it", held_by(OTHER, duration=120), 200.0, 0, None,
        Action.STAND_BY, False, 200.5),
    Row("another's solo lease, expired by my observation: take it over", held_by(OTHER, duration=120),
        220.0, 0, None, Action.ACQUIRE, False),
    Row("renewals failed until the renew deadline: lost, stop acting", held_by(ME), 110.0, 0, 100.0,
        Action.LOST, False),
    Row("the lease names another while I thought I led: lost", held_by(OTHER), 101.0, 0, 100.0,
        Action.LOST, False),
    Row("the lease was deleted while I led: lost", ABSENT, 101.0, 0, 100.0, Action.LOST, False),
    Row("the lease still names me but I am not leading: reclaim it (conditional renew)",
        held_by(ME), 100.0, 0, None, Action.RENEW, False),
    Row("a lease handed back to me: take it at once, whatever I hold",
        replace(held_by(None), handed_to=ME), 100.0, 3, None, Action.ACQUIRE, False),
    Row("a lease handed back to another: wait a whole lease duration (it may have died)",
        replace(held_by(None), handed_to=OTHER), 114.0, 0, None, Action.STAND_BY, False, 114.5),
    Row("a lease handed back to another that did not take it in a lease duration: take it",
        replace(held_by(None), handed_to=OTHER), 115.0, 0, None, Action.ACQUIRE, False),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.why for r in ROWS])
def test_lease_decision_table(row: Row) -> None:
    verdict = decide(row.view, ME, row.now, row.held, T, row.renewed_at, row.lease_s, row.wanted_s)
    assert (verdict.action, verdict.leading) == (row.action, row.leading), verdict.reason
    if row.at is not None:
        assert verdict.at == pytest.approx(row.at)
    if verdict.action in (Action.ACQUIRE, Action.RENEW, Action.LOST):
        assert verdict.at == row.now


def test_timings_must_leave_the_renew_deadline_inside_the_lease_duration() -> None:
    with pytest.raises(ValueError):
        Timing(lease_duration_s=10, renew_deadline_s=10, retry_period_s=2)
    with pytest.raises(ValueError):
        Timing(lease_duration_s=15, renew_deadline_s=10, retry_period_s=10)
    with pytest.raises(ValueError):
        Timing(renew_every_s=10)  # no try would fit before the renew deadline
    with pytest.raises(ValueError):
        Timing(renew_every_s=1)  # renewing more often than the retry period
    with pytest.raises(ValueError):
        Timing(solo_lease_duration_s=10)  # a solo lease shorter than the short one


def test_the_default_timing_renews_a_lease_at_a_third_of_its_duration() -> None:
    timing = Timing()
    assert (timing.renew_after_s(15), timing.deadline_s(15)) == (5, 10)
    assert (timing.renew_after_s(120), timing.deadline_s(120)) == (40, 115)


@given(
    renewed=st.floats(0, 1000),
    observe_delay=st.floats(0, 10),
    held=st.integers(0, 5),
    poll=st.floats(0, 300),
    lease_s=st.sampled_from([15.0, 16.0, 120.0, 600.0]),
)
def test_a_candidate_never_acquires_while_the_leader_may_still_act(
    renewed: float, observe_delay: float, held: int, poll: float, lease_s: float
) -> None:
    """The leader sent its renewal of a `lease_s` lease (short or solo) at `renewed`; a candidate
    saw it `observe_delay` later. At any moment the candidate decides to acquire, the leader's own
    check already says it has stopped."""
    candidate_view = held_by(ME, observed_at=renewed + observe_delay, duration=lease_s)
    now = renewed + observe_delay + poll
    verdict = decide(candidate_view, OTHER, now, held, T, None)
    if verdict.action is Action.ACQUIRE:
        assert not is_leading(renewed, now, T, lease_s)
    leader = decide(candidate_view, ME, now, held, T, renewed, lease_s)
    assert leader.leading == is_leading(renewed, now, T, lease_s)
    if leader.leading:
        assert verdict.action is not Action.ACQUIRE


# --- solo leases and standby announcements -------------------------------------------------------


def test_a_holder_writes_the_solo_lease_until_a_standby_announces_itself() -> None:
    assert lease_to_write(T, None, 100.0) == 120
    assert lease_to_write(T, 100.0, 150.0) == 15
    assert lease_to_write(T, 100.0, 219.9) == 15
    assert lease_to_write(T, 100.0, 220.0) == 120  # three announcements missed: the standby is gone


def test_without_a_solo_lease_a_holder_always_writes_the_short_one() -> None:
    timing = replace(T, solo_lease_duration_s=None)
    assert lease_to_write(timing, None, 100.0) == 15


def test_a_standby_announces_itself_to_a_holder_of_a_solo_lease_at_most_once_a_lease_duration() -> None:
    solo = held_by(OTHER, duration=120)
    assert should_announce(solo, ME, 100.0, T, None, None)
    assert not should_announce(solo, ME, 110.0, T, 100.0, 100.0)
    assert should_announce(solo, ME, 115.0, T, 100.0, 100.0)


def test_a_standby_repeats_its_announcement_only_when_no_standby_announced_lately() -> None:
    short = held_by(OTHER, duration=15)
    assert not should_announce(short, ME, 130.0, T, 100.0, 100.0)
    assert should_announce(short, ME, 140.0, T, 100.0, 100.0)  # every third of the solo lease
    assert not should_announce(short, ME, 140.0, T, None, 120.0)  # another standby did, 20 s ago


def test_nobody_announces_to_themselves_nor_for_a_free_lease() -> None:
    assert not should_announce(held_by(ME, duration=120), ME, 100.0, T, None, None)
    assert not should_announce(held_by(None, duration=120), ME, 100.0, T, None, None)
    assert not should_announce(ABSENT, ME, 100.0, T, None, None)
    assert not should_announce(held_by(OTHER, duration=120), ME, 100.0,
                               replace(T, solo_lease_duration_s=None), None, None)


@given(now=st.floats(100, 200), held=st.integers(0, 4))
def test_a_replica_holding_fewer_leases_is_never_later_to_acquire_than_one_holding_more(
    now: float, held: int
) -> None:
    view = held_by(OTHER)
    more = decide(view, ME, now, held + 1, T, None)
    fewer = decide(view, ME, now, held, T, None)
    if more.action is Action.ACQUIRE:
        assert fewer.action is Action.ACQUIRE


# --- rebalancing ----------------------------------------------------------------------------------


def views_of(**holders: str | None) -> dict[str, LeaseView]:
    return {p: held_by(h) for p, h in holders.items()}


def test_a_replica_holding_none_asks_the_one_holding_both_for_one() -> None:
    views = views_of(agents=OTHER, default=OTHER)
    assert holdings(views, ME, ()) == {ME: [], OTHER: ["agents", "default"]}
    assert partition_to_ask_for(views, ME, ()) == "agents"


def test_no_request_when_a_move_would_only_swap_who_holds_more() -> None:
    assert partition_to_ask_for(views_of(a=OTHER, b=OTHER, c=ME), ME, ("c",)) is None
    assert partition_to_ask_for(views_of(a=OTHER, b=ME), ME, ("b",)) is None
    assert partition_to_ask_for(views_of(a=OTHER), ME, ()) is None, "1 against 0 is balanced"


def test_a_standing_request_is_kept_while_it_is_still_justified_and_dropped_after() -> None:
    asked = views_of(a=OTHER, b=OTHER, c=OTHER)
    asked["a"] = replace(asked["a"], wanted_by=ME)
    assert partition_to_ask_for(asked, ME, ()) == "a", "one request at a time: the one already made"
    assert partition_to_ask_for(asked, ME, ("x", "y")) is None


def test_the_holder_hands_back_only_to_the_asker_and_only_while_it_holds_two_more() -> None:
    mine = views_of(agents=ME, default=ME)
    asked = replace(mine["default"], wanted_by=OTHER)
    assert should_hand_back(asked, ME, mine, ("agents", "default")) == OTHER
    balanced = {**mine, "third": held_by(OTHER)}
    assert should_hand_back(asked, ME, balanced, ("agents", "default")) is None
    assert should_hand_back(mine["default"], ME, mine, ("agents", "default")) is None, "nobody asked"
    assert should_hand_back(replace(asked, holder=OTHER), ME, mine, ("agents",)) is None


@given(partitions=st.integers(1, 12), replicas=st.integers(2, 5), data=st.data())
def test_moves_end_with_no_two_replicas_more_than_one_lease_apart(
    partitions: int, replicas: int, data: st.DataObject
) -> None:
    """Any starting spread; any replica asks when `partition_to_ask_for` says so and the holder
    honours it when `should_hand_back` agrees (both on the true leases). The moves stop, and end
    balanced."""
    names = [f"r{i}" for i in range(replicas)]
    owner = {f"p{i:02d}": data.draw(st.sampled_from(names)) for i in range(partitions)}
    for _ in range(partitions * partitions + 1):
        moved = False
        for asker in names:
            views = {p: held_by(h) for p, h in owner.items()}
            mine = [p for p, h in owner.items() if h == asker]
            wanted = partition_to_ask_for(views, asker, mine)
            if wanted is None:
                continue
            holder = owner[wanted]
            theirs = [p for p, h in owner.items() if h == holder]
            request = replace(held_by(holder), wanted_by=asker)
            if should_hand_back(request, holder, views, theirs) == asker:
                owner[wanted] = asker
                moved = True
        if not moved:
            break
    else:
        raise AssertionError("the moves did not stop")
    counts = [sum(1 for h in owner.values() if h == n) for n in names]
    assert max(counts) - min(counts) <= 1, owner
