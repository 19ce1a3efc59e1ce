"""Another writer of the governed field: the repair backoff as a pure function of status and clock.

`fivespot.controllers.capacity.contest.judge` is driven here by a simulated other writer (rewriting the
field at arbitrary seconds) and by the requeues it asks for; the property tests check the bounds
decision record 0029 states, for any schedule of rewrites.
"""

from __future__ import annotations

import heapq
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fivespot.api.identities import CAPACITY_CONTROLLER
from fivespot.api.kinds.scheduled_capacity import ContestState
from fivespot.controllers.capacity.contest import (
    BACKOFF_CAP,
    MAX_WRITES_PER_MINUTE,
    judge,
    quiet,
    repair_delay,
)
from fivespot.controllers.capacity.observations import field_owner

pytestmark = pytest.mark.unit

T0 = datetime(2026, 12, 6, 6, 0, tzinfo=UTC)


def simulate(rewrites: list[int], horizon: int) -> tuple[list[int], dict[int, ContestState | None]]:
    """Second-by-second: the other writer rewrites at `rewrites`; the controller reconciles on
    each rewrite (the watch) and at each requeue it asked for. Returns the seconds at which the
    controller wrote, and the contest state after each second."""
    state: ContestState | None = None
    ours = True
    writes: list[int] = []
    states: dict[int, ContestState | None] = {}
    wakeups: list[int] = []
    pending = sorted(set(rewrites))
    for second in range(horizon):
        reconcile = False
        if pending and pending[0] == second:
            pending.pop(0)
            ours = False
            reconcile = True
        while wakeups and wakeups[0] <= second:
            heapq.heappop(wakeups)
            reconcile = True
        if reconcile:
            now = T0 + timedelta(seconds=second)
            verdict = judge(state, repair=not ours, writer="kustomize-controller", now=now)
            state = verdict.state
            if not ours and verdict.write_now:
                ours = True
                writes.append(second)
            if verdict.requeue_at is not None:
                heapq.heappush(wakeups, int((verdict.requeue_at - T0).total_seconds()))
        states[second] = state
    return writes, states


def test_the_first_four_rewrites_are_put_back_in_the_same_second() -> None:
    writes, states = simulate([10, 11, 20, 21], 200)
    assert writes == [10, 11, 20, 21]
    contest = states[21]
    assert contest is not None and contest.manager == "kustomize-controller" and contest.repairs == 4


def test_a_writer_that_rewrites_every_second_gets_at_most_seven_repairs_a_minute_then_one_per_5_minutes(
) -> None:
    writes, _ = simulate(list(range(0, 3600)), 3600)
    assert writes[:7] == [0, 1, 2, 3, 8, 18, 38]
    gaps = [b - a for a, b in zip(writes, writes[1:])]
    assert gaps[-1] == int(BACKOFF_CAP.total_seconds())
    assert max(sum(1 for w in writes if start <= w < start + 60) for start in range(3600)) <= MAX_WRITES_PER_MINUTE


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=1800), max_size=200))
def test_no_schedule_of_rewrites_gets_more_than_the_stated_writes_in_any_minute(rewrites: list[int]) -> None:
    writes, _ = simulate(rewrites, 2400)
    for start in range(0, 2400):
        assert sum(1 for w in writes if start <= w < start + 60) <= MAX_WRITES_PER_MINUTE


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=900), min_size=1, max_size=100))
def test_every_rewrite_is_repaired_and_the_contest_clears_once_the_writer_stops(rewrites: list[int]) -> None:
    last = max(rewrites)
    horizon = last + int((BACKOFF_CAP + quiet(100)).total_seconds()) + 10
    writes, states = simulate(rewrites, horizon)
    assert writes and writes[-1] >= last  # the last rewrite was put back
    assert writes[-1] - last <= BACKOFF_CAP.total_seconds()
    assert states[horizon - 1] is None  # FieldContested gone, the count starts again


def test_a_contest_that_went_quiet_starts_again_at_an_immediate_repair() -> None:
    writes, states = simulate([0, 1, 2, 3, 4, 5, 400], 800)
    assert 400 in writes
    after = states[400]
    assert after is not None and after.repairs == 1


def test_the_delay_doubles_from_five_seconds_and_stops_at_five_minutes() -> None:
    assert [repair_delay(n).total_seconds() for n in range(0, 12)] == [
        0, 0, 0, 0, 5, 10, 20, 40, 80, 160, 300, 300]
    assert quiet(0) == timedelta(minutes=1) and quiet(11) == timedelta(minutes=10)


def test_a_rewrite_owned_by_fivespot_itself_is_no_contest() -> None:
    verdict = judge(None, repair=True, writer=CAPACITY_CONTROLLER, now=T0)
    assert verdict.write_now and verdict.state is None


def test_the_field_owner_is_the_most_recent_other_manager_holding_the_path() -> None:
    managed = [
        {"manager": CAPACITY_CONTROLLER, "time": "2026-12-06T06:00:03Z",
         "fieldsV1": {"f:spec": {"f:replicas": {}}}},
        {"manager": "argocd-controller", "time": "2026-12-06T06:00:01Z",
         "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {}}}},
        {"manager": "kustomize-controller", "time": "2026-12-06T06:00:02Z",
         "fieldsV1": {"f:spec": {"f:replicas": {}}}},
        {"manager": "kube-controller-manager", "time": "2026-12-06T06:00:09Z",
         "fieldsV1": {"f:status": {"f:replicas": {}}}},
    ]
    assert field_owner(managed, "spec.replicas", CAPACITY_CONTROLLER) == "kustomize-controller"
    assert field_owner(managed[:1], "spec.replicas", CAPACITY_CONTROLLER) == CAPACITY_CONTROLLER
    assert field_owner(managed, "spec.paused", CAPACITY_CONTROLLER) is None
    assert field_owner("not a list", "spec.replicas", CAPACITY_CONTROLLER) is None
