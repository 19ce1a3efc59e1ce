"""The shared provider status: when each timestamp moves, and that nothing is written needlessly."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from fivespot.api.kinds.providers import Condition, ProviderStatus
from fivespot.controllers.spotschedules import capital_markets, time_based
from fivespot.controllers.spotschedules.status import (
    MAX_MESSAGE_LENGTH,
    desired_status,
    read_prior_status,
    rfc3339,
    status_patch,
)

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
T1 = T0 + dt.timedelta(minutes=5)
T2 = T0 + dt.timedelta(hours=1)
OK = (True, "WindowOpen", "schedule window open")


def apply(status: dict[str, Any] | None, patch: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the API server stores after a JSON merge patch of the status."""
    if patch is None:
        return status
    merged = dict(status or {})
    for key, value in patch["status"].items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def publish(prior: ProviderStatus | None, now: dt.datetime, *, active: bool = True,
            ready: tuple[bool, str, str] = OK, nxt: dt.datetime | None = None,
            generation: int = 1) -> ProviderStatus:
    return desired_status(active=active, next_transition=nxt, generation=generation, prior=prior,
                          now=now, ready=ready)


def test_rfc3339_is_utc_to_the_second() -> None:
    new_york = dt.timezone(dt.timedelta(hours=-5))
    assert rfc3339(dt.datetime(2026, 11, 30, 7, 0, 1, 999999, tzinfo=new_york)) == (
        "2026-11-30T12:00:01Z"
    )


def test_naive_instant_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        rfc3339(dt.datetime(2026, 11, 30))


def test_first_publish_sets_both_transition_times_to_now() -> None:
    status = publish(None, T0, nxt=T2, generation=3)
    assert status.active is True and status.observed_generation == 3
    assert status.last_transition_time == "2026-11-30T12:00:00Z"
    assert status.next_transition_time == "2026-11-30T13:00:00Z"
    ready = status.condition("Ready")
    assert ready is not None and ready.status == "True"
    assert ready.last_transition_time == "2026-11-30T12:00:00Z"


def test_last_transition_time_moves_only_when_active_flips() -> None:
    first = publish(None, T0)
    same = publish(first, T1, generation=2)
    assert same.last_transition_time == first.last_transition_time
    flipped = publish(same, T2, active=False, ready=(True, "WindowClosed", "closed"))
    assert flipped.last_transition_time == "2026-11-30T13:00:00Z"


def test_ready_time_moves_only_when_ready_status_changes() -> None:
    first = publish(None, T0)
    reworded = publish(first, T1, active=False, ready=(True, "WindowClosed", "closed"))
    ready = reworded.condition("Ready")
    assert ready is not None and ready.reason == "WindowClosed"
    assert ready.last_transition_time == "2026-11-30T12:00:00Z"
    broken = publish(reworded, T2, active=False, ready=(False, "InvalidSpec", "bad"))
    ready = broken.condition("Ready")
    assert ready is not None and ready.status == "False"
    assert ready.last_transition_time == "2026-11-30T13:00:00Z"


def test_conditions_of_other_types_are_kept_in_place() -> None:
    other = Condition(type="CalendarCurrent", status="False", reason="Fine", message="",
                      last_transition_time="2026-01-01T00:00:00Z")
    first = publish(None, T0)
    prior = first.model_copy(update={"conditions": (other, *first.conditions)})
    again = publish(prior, T1)
    assert [c.type for c in again.conditions] == ["CalendarCurrent", "Ready"]
    assert again.conditions[0] == other


def test_an_invalid_spec_is_stalled_for_kstatus_until_fixed() -> None:
    first = publish(None, T0)
    broken = publish(first, T1, ready=(False, "InvalidSpec", "bad"))
    stalled = broken.condition("Stalled")
    assert stalled is not None and (stalled.status, stalled.reason, stalled.message) == ("True", "InvalidSpec", "bad")
    assert stalled.last_transition_time == "2026-11-30T12:05:00Z"
    still = publish(broken, T2, ready=(False, "InvalidSpec", "bad"))
    assert still.condition("Stalled") == stalled
    fixed = publish(still, T2)
    assert fixed.condition("Stalled") is None
    assert [c.type for c in fixed.conditions] == ["Ready"]


def test_patch_is_none_when_nothing_changed() -> None:
    first = publish(None, T0, nxt=T2)
    stored = apply(None, status_patch(None, first))
    assert status_patch(stored, publish(read_prior_status(stored), T1, nxt=T2)) is None
    assert status_patch(first, publish(first, T1, nxt=T2)) is None


def test_patch_carries_the_whole_status_when_anything_changed() -> None:
    first = publish(None, T0, nxt=T2)
    stored = apply(None, status_patch(None, first))
    patch = status_patch(stored, publish(first, T1, nxt=T2, generation=2))
    assert patch is not None
    assert patch["status"] == {**(stored or {}), "observedGeneration": 2}


def test_dropping_next_transition_deletes_it_with_null() -> None:
    first = publish(None, T0, nxt=T2)
    stored = apply(None, status_patch(None, first))
    patch = status_patch(stored, publish(first, T1, nxt=None))
    assert patch is not None and patch["status"]["nextTransitionTime"] is None
    assert "nextTransitionTime" not in (apply(stored, patch) or {})


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "active",
        {},
        {"active": "true", "lastTransitionTime": "2026-11-30T12:00:00Z"},
        {"active": True},
        {"active": True, "lastTransitionTime": "yesterday"},
        {"active": True, "lastTransitionTime": "2026-11-30T12:00:00"},  # no zone
    ],
)
def test_prior_status_without_bool_active_and_timestamp_counts_as_unpublished(raw: object) -> None:
    assert read_prior_status(raw) is None


def test_prior_status_is_read_leniently() -> None:
    prior = read_prior_status({
        "active": False,
        "lastTransitionTime": "2026-11-30T12:00:00Z",
        "observedGeneration": "7",
        "nextTransitionTime": 42,
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "WindowClosed", "message": "closed",
             "lastTransitionTime": "2026-11-01T00:00:00Z"},
            {"type": "Ready"},
            "garbage",
        ],
        "somethingElse": 1,
    })
    assert prior is not None
    assert prior.active is False and prior.observed_generation == 0
    assert prior.next_transition_time is None
    assert [c.reason for c in prior.conditions] == ["WindowClosed"]


WINDOW = {"daysOfWeek": ["mon-fri"], "hoursOfDay": ["9-17"], "timezone": "America/New_York"}


def test_evaluate_requeues_at_the_next_boundary_and_is_quiet_until_then() -> None:
    patch, requeue = time_based.evaluate(WINDOW, 1, None, T0)  # Monday 07:00 in New York
    assert requeue == dt.datetime(2026, 11, 30, 14, 0, tzinfo=UTC)
    stored = apply(None, patch)
    assert stored is not None and stored["active"] is False
    assert stored["nextTransitionTime"] == "2026-11-30T14:00:00Z"
    assert stored["conditions"][0]["reason"] == "WindowClosed"
    # Any reconcile before the boundary (a resync, an unrelated event) writes nothing.
    for minutes in (1, 59, 119):
        later = T0 + dt.timedelta(minutes=minutes)
        assert time_based.evaluate(WINDOW, 1, stored, later) == (None, requeue)
    # At the boundary the flip is written and the next one scheduled.
    boundary = dt.datetime(2026, 11, 30, 14, tzinfo=UTC)
    patch, requeue = time_based.evaluate(WINDOW, 1, stored, boundary)
    assert patch is not None and requeue == dt.datetime(2026, 11, 30, 23, 0, tzinfo=UTC)
    opened = apply(stored, patch)
    assert opened is not None and opened["active"] is True
    assert opened["lastTransitionTime"] == "2026-11-30T14:00:00Z"
    assert opened["conditions"][0]["reason"] == "WindowOpen"
    assert opened["conditions"][0]["lastTransitionTime"] == "2026-11-30T12:00:00Z"


def test_disabled_window_reports_why_and_never_requeues() -> None:
    patch, requeue = time_based.evaluate({**WINDOW, "enabled": False}, 2, None, T0)
    assert requeue is None and patch is not None
    assert patch["status"]["active"] is False
    assert "nextTransitionTime" not in patch["status"]
    assert patch["status"]["conditions"][0]["reason"] == "Disabled"


@pytest.mark.parametrize(
    ("spec", "fragments"),
    [
        ({**WINDOW, "timezone": "America/Nowhere"},
         ["spec.timezone: must be an IANA time zone name", "'America/Nowhere'"]),
        ({**WINDOW, "hoursOfDay": ["9-17", "18-25"]},
         ["spec.hoursOfDay[1]: must be an hour 0-23", "'18-25'"]),
        ({**WINDOW, "daysOfWeek": "mon-fri"}, ["spec.daysOfWeek: Input should be a valid tuple"]),
    ],
)
def test_invalid_time_based_spec_is_reported_as_not_ready(
    spec: dict[str, Any], fragments: list[str]
) -> None:
    stored = apply(None, time_based.evaluate(WINDOW, 1, None, T0)[0])
    patch, requeue = time_based.evaluate(spec, 2, stored, T1)
    assert requeue is None and patch is not None
    status = patch["status"]
    assert status["active"] is False and status["observedGeneration"] == 2
    assert "nextTransitionTime" in status and status["nextTransitionTime"] is None
    ready, stalled = status["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "InvalidSpec")
    assert (stalled["type"], stalled["status"], stalled["reason"]) == ("Stalled", "True", "InvalidSpec")
    assert ready["message"].startswith("the spec is invalid, so status.active keeps its last value")
    for fragment in fragments:
        assert fragment in ready["message"]
    # Reporting the same problem again writes nothing.
    assert time_based.evaluate(spec, 2, apply(stored, patch), T2) == (None, None)


def test_invalid_capital_markets_spec_is_reported_as_not_ready() -> None:
    spec = {"timezone": "America/New_York",
            "sessions": [{"days": "mon-fri", "open": "16:00", "close": "09:30"}]}
    patch, requeue = capital_markets.evaluate(spec, 1, None, T0)
    assert requeue is None and patch is not None
    ready, stalled = patch["status"]["conditions"]  # Stalled=True beside Ready=False (kstatus)
    assert (stalled["type"], stalled["status"]) == ("Stalled", "True")
    assert ready["status"] == "False"
    assert "spec.sessions[0]: open must be earlier than close" in ready["message"]


def test_many_errors_are_summarised_within_the_message_limit() -> None:
    spec = {"daysOfWeek": [f"bad{i}" * 10 for i in range(14)], "hoursOfDay": ["x"] * 24}
    patch, _ = time_based.evaluate(spec, 1, None, T0)
    assert patch is not None
    message = patch["status"]["conditions"][0]["message"]
    assert "and 33 more" in message and len(message) <= MAX_MESSAGE_LENGTH


def test_evaluate_refuses_a_naive_now() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        time_based.evaluate(WINDOW, 1, None, dt.datetime(2026, 11, 30, 12))
