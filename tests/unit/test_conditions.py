"""The status-condition rule every fivespot controller shares (`fivespot.api.conditions`): Ready settles,
Reconciling and Stalled are present only while True, transitions move only on a flip."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from fivespot.api import conditions as cond
from fivespot.api.kinds.scheduled_capacity import ConditionStatus
from fivespot.controllers.capacity import conditions as capacity_conditions

pytestmark = pytest.mark.unit

T0 = datetime(2026, 3, 2, 14, 0, tzinfo=timezone.utc)
ORDER = (cond.READY, cond.RECONCILING, cond.STALLED, "Other")


def _types(observations: tuple[cond.Observation, ...]) -> dict[str, tuple[str, str]]:
    return {o.type: (o.status.value, o.reason) for o in observations}


def test_a_settled_object_is_ready_and_carries_nothing_else() -> None:
    assert _types(cond.settled("ScheduleInactive", "closed")) == {"Ready": ("True", "ScheduleInactive")}


def test_an_object_on_its_way_is_not_ready_and_reconciling_names_the_step() -> None:
    assert _types(cond.working("ScheduleInactive", "Draining", "draining")) == {
        "Ready": ("False", "ScheduleInactive"), "Reconciling": ("True", "Draining")}


def test_an_object_that_needs_a_person_is_not_ready_and_stalled() -> None:
    assert _types(cond.stalled("InvalidSpec", "fix it")) == {
        "Ready": ("False", "InvalidSpec"), "Stalled": ("True", "InvalidSpec")}


def test_stalled_wins_over_reconciling() -> None:
    both = cond.settle("X", "m", cond.true(cond.STALLED, "S", "m"), cond.true(cond.RECONCILING, "R", "m"))
    assert _types(both) == {"Ready": ("False", "X"), "Stalled": ("True", "S")}


def test_reconciling_is_dropped_once_the_object_settles_and_ready_flips_then() -> None:
    working = cond.merge((), cond.working("A", "Draining", "m"), T0, 1, ORDER)
    later = T0 + timedelta(minutes=5)
    done = cond.merge(working, cond.settled("A", "m"), later, 2, ORDER)
    assert [(c.type, c.status) for c in done] == [("Ready", ConditionStatus.TRUE)]
    assert done[0].last_transition_time == later and done[0].observed_generation == 2


def test_a_condition_keeps_its_transition_time_while_its_status_holds() -> None:
    first = cond.merge((), (*cond.settled("A", "one"), cond.false("Other", "B", "m")), T0, 1, ORDER)
    again = cond.merge(first, (*cond.settled("C", "two"), cond.false("Other", "B", "m")),
                       T0 + timedelta(hours=1), 1, ORDER)
    assert [c.last_transition_time for c in again] == [T0, T0]
    assert again[0].reason == "C" and again[0].message == "two"


def test_conditions_come_in_the_given_order_and_unknown_types_last() -> None:
    merged = cond.merge((), (cond.false("Zeta", "z", "m"), cond.false("Other", "o", "m"),
                             *cond.stalled("S", "m")), T0, 1, ORDER)
    assert [c.type for c in merged] == ["Ready", "Stalled", "Other", "Zeta"]


def test_a_carried_over_condition_keeps_the_generation_it_was_computed_from() -> None:
    first = cond.merge((), (cond.false("Other", "o", "m"),), T0, 1, ORDER)
    carried = cond.kept(first, cond.unknown("Other", "NotEvaluated", "m"))
    merged = cond.merge(first, (*cond.settled("A", "m"), carried), T0, 4, ORDER)
    assert {c.type: c.observed_generation for c in merged} == {"Ready": 4, "Other": 1}


def test_scheduled_capacity_orders_by_its_own_condition_types() -> None:
    merged = capacity_conditions.merge((), (cond.false(capacity_conditions.TARGET_RESOLVED, "t", "m"),
                                            *cond.working("A", "B", "m")), T0, 1)
    assert [c.type for c in merged] == ["Ready", "Reconciling", "TargetResolved"]


def test_an_unchanged_condition_is_carried_over_as_it_was_and_a_changed_one_is_made_anew() -> None:
    first = cond.merge((), (*cond.settled("A", "one"), cond.false("Other", "B", "m")), T0, 1, ORDER)
    again = cond.merge(first, (*cond.settled("A", "two"), cond.false("Other", "B", "m")),
                       T0 + timedelta(hours=1), 1, ORDER)
    assert again[1] is first[1]
    assert again[0] is not first[0] and again[0].message == "two"
    assert again[0].last_transition_time == T0
    bumped = cond.merge(again, (*cond.settled("A", "two"), cond.false("Other", "B", "m")),
                        T0 + timedelta(hours=2), 2, ORDER)
    assert [c.observed_generation for c in bumped] == [2, 2]
    assert [c.last_transition_time for c in bumped] == [T0, T0]
