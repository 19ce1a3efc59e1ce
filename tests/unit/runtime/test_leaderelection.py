"""The lease decision is a pure function of (lease as observed, me, now, leases held, when I last
renewed). The table covers acquire / renew / hold / stand by / lost, spreading, and the safety
property: a leader stops acting before any candidate can take over."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.leaderelection import (
    Action,
    LeaseView,
    Timing,
    decide,
    holdings,
    is_leading,
    partition_to_ask_for,
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
    Row("I lead and renewal is not yet due: hold until it is", held_by(ME), 101.0, 0, 100.0,
        Action.HOLD, True, 102.0),
    Row("I lead and renewal is due: renew, still leading", held_by(ME), 102.0, 0, 100.0, Action.RENEW, True),
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
    verdict = decide(row.view, ME, row.now, row.held, T, row.renewed_at)
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


@given(
    renewed=st.floats(0, 1000),
    observe_delay=st.floats(0, 10),
    held=st.integers(0, 5),
    poll=st.floats(0, 50),
)
def test_a_candidate_never_acquires_while_the_leader_may_still_act(
    renewed: float, observe_delay: float, held: int, poll: float
) -> None:
    """The leader sent its renewal at `renewed`; a candidate saw it `observe_delay` later. At any
    moment the candidate decides to acquire, the leader's own check already says it has stopped."""
    candidate_view = held_by(ME, observed_at=renewed + observe_delay, duration=T.lease_duration_s)
    now = renewed + observe_delay + poll
    verdict = decide(candidate_view, OTHER, now, held, T, None)
    if verdict.action is Action.ACQUIRE:
        assert not is_leading(renewed, now, T)


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
