"""`spec.override` on the built-in schedules: held on (or off) until `until`, handed back to the
schedule at exactly that instant, whatever happened to the provider in between. Every decision
here is the pure one the provider runs, driven by an injected clock, so the three hours of "on for
the next 3 hours" are walked through instant by instant without waiting for them."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pydantic import ValidationError

from fivespot.api.kinds.composite import CompositeScheduleSpec
from fivespot.api.kinds.providers import (
    UNTIL_MESSAGE,
    UNTIL_RULE,
    ManualScheduleSpec,
    TimeBasedSpotScheduleSpec,
    parse_until,
)
from fivespot.api.provider_contract import LookupFailed, Resolved, Unresolved, UnresolvedReason
from fivespot.api.providers import BUILTIN_PROVIDERS
from fivespot.compiler.emit.crds import builtin_provider
from fivespot.controllers.spotschedules import capital_markets, composite, manual, override, time_based
from fivespot.controllers.spotschedules.composite import Children
from fivespot.controllers.spotschedules.reconcile import plan
from tests.celgo import cel_accepts

pytestmark = pytest.mark.unit

UTC = dt.timezone.utc
V1 = "spotschedules.5spot.finos.org/v1alpha1"
MONDAY_NIGHT = dt.datetime(2026, 3, 2, 19, 0, tzinfo=UTC)  # office hours 9-17 London: closed
OFFICE = {"daysOfWeek": ["mon-fri"], "hoursOfDay": ["9-17"], "timezone": "Europe/London"}
SECOND = dt.timedelta(seconds=1)


def z(instant: dt.datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def held(spec: dict[str, Any], active: bool, until: dt.datetime) -> dict[str, Any]:
    return {**spec, "override": {"active": active, "until": z(until)}}


def ready(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "Ready")


def obj(spec: dict[str, Any], status: dict[str, Any] | None = None,
        kind: str = "TimeBasedSpotSchedule") -> dict[str, Any]:
    found: dict[str, Any] = {"apiVersion": V1, "kind": kind,
                             "metadata": {"name": "office-hours", "namespace": "agents",
                                          "generation": 2, "resourceVersion": "7"},
                             "spec": spec}
    if status is not None:
        found["status"] = status
    return found


def merged(status: dict[str, Any] | None, patch: dict[str, Any] | None) -> dict[str, Any]:
    """The status after the merge patch, as the API server stores it."""
    result = dict(status or {})
    for key, value in ((patch or {}).get("status") or {}).items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


# --- three hours on, walked through -------------------------------------------------------------


def test_an_override_for_3_hours_flips_on_and_hands_back_at_its_expiry_to_the_second() -> None:
    until = MONDAY_NIGHT + dt.timedelta(hours=3)
    spec = held(OFFICE, True, until)

    first = plan(obj(spec), time_based.evaluate, MONDAY_NIGHT)
    assert first.patch is not None
    status = merged(None, first.patch)
    assert status["active"] is True and status["overrideUntil"] == z(until)
    # The schedule is closed at 22:00 too, so the flip back is the override's expiry.
    assert status["nextTransitionTime"] == z(until)
    assert (ready(status)["status"], ready(status)["reason"]) == ("True", "Overridden")
    assert "until 2026-03-02T22:00:00Z" in ready(status)["message"]
    assert "the schedule alone is inactive now (WindowClosed" in ready(status)["message"]
    assert first.requeue_at == until and first.requeue_after_s == 3 * 3600
    assert [(e.reason, e.type) for e in first.events] == [("OverrideStarted", "Normal")]

    # Every reconcile before the expiry (a resync, a restart) writes nothing and waits for it.
    for later in (MONDAY_NIGHT + dt.timedelta(minutes=1), until - dt.timedelta(minutes=59),
                  until - SECOND):
        again = plan(obj(spec, status), time_based.evaluate, later)
        assert again.patch is None and again.events == ()
        assert again.requeue_at == until

    back = plan(obj(spec, status), time_based.evaluate, until)
    assert back.patch is not None
    after = merged(status, back.patch)
    assert back.patch["status"]["overrideUntil"] is None  # deleted by the merge patch
    assert after["active"] is False and "overrideUntil" not in after
    assert after["lastTransitionTime"] == z(until)
    assert ready(after)["reason"] == "WindowClosed"
    assert after["nextTransitionTime"] == "2026-03-03T09:00:00Z"  # the schedule's own next open
    assert [e.reason for e in back.events] == ["OverrideExpired"]
    assert "ended at 2026-03-02T22:00:00Z" in back.events[0].note


def test_a_provider_down_at_the_expiry_hands_back_on_its_first_reconcile_after() -> None:
    until = MONDAY_NIGHT + dt.timedelta(hours=3)
    spec = held(OFFICE, True, until)
    status = merged(None, plan(obj(spec), time_based.evaluate, MONDAY_NIGHT).patch)
    restarted = until + dt.timedelta(minutes=42)  # nothing ran at 22:00
    caught_up = plan(obj(spec, status), time_based.evaluate, restarted)
    after = merged(status, caught_up.patch)
    assert after["active"] is False and "overrideUntil" not in after
    assert [e.reason for e in caught_up.events] == ["OverrideExpired"]


def test_when_the_schedule_agrees_at_the_expiry_the_next_flip_is_the_schedules_own() -> None:
    morning = dt.datetime(2026, 3, 2, 7, 0, tzinfo=UTC)
    until = dt.datetime(2026, 3, 2, 10, 0, tzinfo=UTC)  # inside office hours: open then anyway
    decision = override.with_override(time_based.decide)(
        TimeBasedSpotScheduleSpec.model_validate(held(OFFICE, True, until)), morning)
    assert decision.active is True and decision.override_until == until
    assert decision.next_transition == dt.datetime(2026, 3, 2, 18, 0, tzinfo=UTC)
    assert decision.wake_at == until  # still looked at then, to drop overrideUntil


def test_an_override_off_holds_an_open_window_closed() -> None:
    noon = dt.datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    until = noon + dt.timedelta(minutes=30)
    patch, requeue = time_based.evaluate(held(OFFICE, False, until), 1, None, noon)
    assert patch is not None and patch["status"]["active"] is False
    assert patch["status"]["nextTransitionTime"] == z(until) and requeue == until


def test_an_override_whose_until_has_passed_does_nothing() -> None:
    passed = held(OFFICE, True, MONDAY_NIGHT - SECOND)
    assert time_based.evaluate(passed, 1, None, MONDAY_NIGHT) == time_based.evaluate(
        OFFICE, 1, None, MONDAY_NIGHT)


@pytest.mark.parametrize(("evaluate", "spec"), [
    (manual.evaluate, {"enabled": False}),
    (time_based.evaluate, {**OFFICE, "enabled": False}),
    (capital_markets.evaluate, {"timezone": "America/New_York",
                                "sessions": [{"days": "mon-fri", "open": "09:30", "close": "16:00"}]}),
])
def test_every_built_in_kind_takes_the_same_override(evaluate: Any, spec: dict[str, Any]) -> None:
    until = MONDAY_NIGHT + dt.timedelta(hours=3)
    patch, requeue = evaluate(held(spec, True, until), 1, None, MONDAY_NIGHT)
    assert patch["status"]["active"] is True and patch["status"]["overrideUntil"] == z(until)
    assert requeue == until
    after, _ = evaluate(held(spec, True, until), 1, merged(None, patch), until)
    assert after["status"]["active"] is False and after["status"]["overrideUntil"] is None


def test_a_manual_schedule_override_needs_no_calendar_to_hand_back() -> None:
    until = MONDAY_NIGHT + dt.timedelta(hours=3)
    patch, requeue = manual.evaluate({"enabled": True, "override": {"active": False,
                                                                    "until": z(until)}},
                                     1, None, MONDAY_NIGHT)
    assert patch is not None and patch["status"]["active"] is False
    assert patch["status"]["nextTransitionTime"] == z(until) and requeue == until


def test_removing_the_override_before_its_expiry_hands_back_and_says_cleared() -> None:
    until = MONDAY_NIGHT + dt.timedelta(hours=3)
    status = merged(None, plan(obj(held(OFFICE, True, until)), time_based.evaluate,
                               MONDAY_NIGHT).patch)
    cleared = plan(obj(OFFICE, status), time_based.evaluate, MONDAY_NIGHT + dt.timedelta(hours=1))
    assert merged(status, cleared.patch)["active"] is False
    assert [e.reason for e in cleared.events] == ["OverrideCleared"]


def test_a_new_until_or_value_is_a_new_override_and_an_invalid_spec_tells_no_override_event() -> None:
    until = MONDAY_NIGHT + dt.timedelta(hours=3)
    status = merged(None, plan(obj(held(OFFICE, True, until)), time_based.evaluate,
                               MONDAY_NIGHT).patch)
    longer = plan(obj(held(OFFICE, True, until + dt.timedelta(hours=1)), status),
                  time_based.evaluate, MONDAY_NIGHT)
    assert [e.reason for e in longer.events] == ["OverrideStarted"]
    flipped = plan(obj(held(OFFICE, False, until), status), time_based.evaluate, MONDAY_NIGHT)
    assert [e.reason for e in flipped.events] == ["OverrideStarted"]
    broken = plan(obj({**held(OFFICE, True, until), "hoursOfDay": ["9-25"]}, status),
                  time_based.evaluate, MONDAY_NIGHT)
    assert broken.patch is not None and ready(merged(status, broken.patch))["reason"] == "InvalidSpec"
    assert broken.events == ()


# --- CompositeSchedule ----------------------------------------------------------------------------


def ref(name: str, kind: str = "ManualSchedule") -> dict[str, str]:
    return {"apiVersion": V1, "kind": kind, "name": name}


DESK = {"allOf": [{"anyOf": [ref("office", "TimeBasedSpotSchedule"), ref("override")]},
                  {"not": ref("freeze")}]}


def children(observed: dict[str, Any], upcoming: dict[str, dt.datetime] | None = None) -> Children:
    return Children(name="desk", lookup=lambda r: observed[r.name],
                    upcoming=lambda r: (upcoming or {}).get(r.name), graph=lambda name: None)


def test_a_composite_override_decides_even_over_unresolved_children_and_hands_back() -> None:
    until = MONDAY_NIGHT + dt.timedelta(hours=3)
    gone = Unresolved(UnresolvedReason.NOT_FOUND, "create it")
    spec = {**DESK, "override": {"active": True, "until": z(until)}}
    patch, requeue = composite.evaluate_with(
        children({"office": Resolved(False), "override": gone, "freeze": LookupFailed("syncing")}),
        spec, 1, None, MONDAY_NIGHT)
    assert patch is not None and requeue == until
    status = patch["status"]
    assert status["active"] is True and status["overrideUntil"] == z(until)
    assert ready(status)["reason"] == "Overridden" and ready(status)["status"] == "True"
    assert "nextTransitionTime" not in status  # what the children will say then is unknown

    back, requeue = composite.evaluate_with(
        children({"office": Resolved(False), "override": Resolved(False),
                  "freeze": Resolved(False)}), spec, 1, status, until)
    assert back is not None and requeue is None
    assert back["status"]["active"] is False and back["status"]["overrideUntil"] is None
    assert ready(back["status"])["reason"] == "ExpressionFalse"


def test_a_composite_override_foretells_its_next_flip_from_the_childrens() -> None:
    until = MONDAY_NIGHT + dt.timedelta(hours=3)
    opens = dt.datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
    closes = dt.datetime(2026, 3, 3, 18, 0, tzinfo=UTC)
    observed = {"office": Resolved(False), "override": Resolved(False), "freeze": Resolved(False)}
    on = {**DESK, "override": {"active": True, "until": z(until)}}
    patch, _ = composite.evaluate_with(children(observed, {"office": opens}), on, 1, None,
                                       MONDAY_NIGHT)
    assert patch is not None and patch["status"]["nextTransitionTime"] == z(until)
    # Held off across the next open: off until the expiry, which comes after the open, and then
    # the office is open, so the composite turns on at the expiry.
    off = {**DESK, "override": {"active": False, "until": z(opens + dt.timedelta(hours=2))}}
    patch, _ = composite.evaluate_with(children(observed, {"office": opens}), off, 1, None,
                                       MONDAY_NIGHT)
    assert patch is not None
    assert patch["status"]["nextTransitionTime"] == z(opens + dt.timedelta(hours=2))
    # Held on until the office opens: nothing changes then; the next flip is its close, unknown
    # to the composite until the child publishes it after opening.
    until_open = {**DESK, "override": {"active": True, "until": z(opens)}}
    patch, _ = composite.evaluate_with(children(observed, {"office": opens}), until_open, 1, None,
                                       MONDAY_NIGHT)
    assert patch is not None and "nextTransitionTime" not in patch["status"]
    assert closes > opens


# --- the model and its schema ---------------------------------------------------------------------


@pytest.mark.parametrize(("text", "instant"), [
    ("2026-03-02T22:00:00Z", dt.datetime(2026, 3, 2, 22, tzinfo=UTC)),
    ("2026-03-02T23:00:00+01:00", dt.datetime(2026, 3, 2, 22, tzinfo=UTC)),
    ("2026-03-02T16:30:00-05:30", dt.datetime(2026, 3, 2, 22, tzinfo=UTC)),
    ("2026-03-02T22:00:00.5Z", dt.datetime(2026, 3, 2, 22, 0, 0, 500000, tzinfo=UTC)),
    ("2026-03-02T22:00:00.123456789Z", dt.datetime(2026, 3, 2, 22, 0, 0, 123456, tzinfo=UTC)),
    ("2028-02-29T00:00:00Z", dt.datetime(2028, 2, 29, tzinfo=UTC)),
    ("2000-02-29T00:00:00Z", dt.datetime(2000, 2, 29, tzinfo=UTC)),
    ("1600-02-29T00:00:00Z", dt.datetime(1600, 2, 29, tzinfo=UTC)),
    ("9999-12-31T23:59:59-23:59", dt.datetime(9999, 12, 31, 23, 59, 59,
                                              tzinfo=dt.timezone(-dt.timedelta(hours=23, minutes=59)))),
])
def test_until_reads_every_rfc_3339_instant_the_rule_admits(text: str, instant: dt.datetime) -> None:
    assert parse_until(text) == instant
    assert cel_accepts(UNTIL_RULE, text)


@pytest.mark.parametrize("text", [
    "2026-03-02T22:00:00", "2026-03-02 22:00:00Z", "2026-03-02t22:00:00z", "2026-03-02T22:00Z",
    "2026-03-02T24:00:00Z", "2026-03-02T22:00:60Z", "2026-02-30T22:00:00Z", "2026-03-02T22:00:00+0100",
    "0999-03-02T22:00:00Z", "2026-03-02T22:00:00.1234567890Z", "tomorrow", "", "2026-03-02",
    "2026-03-02T22:00:00+24:00", "2026-03-02T22:00:00Z\n", "2027-02-29T00:00:00Z",
    "1900-02-29T00:00:00Z", "2100-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-13-01T00:00:00Z",
    "2026-00-10T00:00:00Z", "2026-01-00T00:00:00Z", "0000-02-29T00:00:00Z",
])
def test_until_refuses_what_is_not_such_an_instant(text: str) -> None:
    with pytest.raises(ValueError, match="must be an RFC 3339 instant"):
        parse_until(text)
    assert not cel_accepts(UNTIL_RULE, text)  # the API server refuses it alike
    with pytest.raises(ValidationError):
        ManualScheduleSpec.model_validate({"enabled": True,
                                           "override": {"active": True, "until": text}})


@pytest.mark.parametrize("override", [
    {"active": True}, {"until": "2026-03-02T22:00:00Z"}, {"active": "true", "until": "2026-03-02T22:00:00Z"},
    {"active": True, "until": "2026-03-02T22:00:00Z", "reason": "x"},
])
def test_an_override_is_exactly_active_and_until(override: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        TimeBasedSpotScheduleSpec.model_validate({**OFFICE, "override": override})


def test_every_built_in_kinds_crd_carries_the_same_override_and_the_status_its_expiry() -> None:
    schemas = []
    for kind in BUILTIN_PROVIDERS:
        info = builtin_provider(kind)
        schemas.append(info.spec["properties"]["override"])
        assert info.status is not None and "overrideUntil" in info.status["properties"]
    first = schemas[0]
    assert all(schema == first for schema in schemas)
    assert first["required"] == ["active", "until"]
    until = first["properties"]["until"]
    assert until["type"] == "string" and "format" not in until
    assert until["x-kubernetes-validations"] == [{"rule": UNTIL_RULE, "message": UNTIL_MESSAGE}]
    assert first["properties"]["active"]["type"] == "boolean"
    CompositeScheduleSpec.model_validate({**DESK, "override": {"active": False,
                                                               "until": "2026-03-02T22:00:00Z"}})
