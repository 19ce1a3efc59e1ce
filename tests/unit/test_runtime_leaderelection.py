"""The lease decision is a pure function of (lease as observed, me, now, leases held, when I last
renewed). The table covers acquire / renew / hold / stand by / lost, spreading, and the safety
property: a leader stops acting before any candidate can take over."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.leaderelection import (
    Action,
    LeaseView,
    Timing,
    decide,
    is_leading,
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
