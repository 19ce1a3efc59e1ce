"""TimeBasedSpotSchedule's minute windows, open ranges and closures: the model, the CRD rules as
the API server runs them (offline checker), the day plans, daylight saving in several zones, and
minute-exact properties."""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from fivespot.api.holiday_calendars import Unanswerable, holiday_year
from fivespot.api.kinds.providers import AbsoluteRange, TimeBasedSpotScheduleSpec, parse_days
from fivespot.api.providers import BuiltinProvider
from fivespot.compiler.emit.crds import builtin_provider, crd
from fivespot.controllers.spotschedules import time_based as tb
from fivespot.controllers.spotschedules import timeline
from fivespot.policies.admission_eval import Checker, Request
from fivespot.policies.kubeversions import DEFAULT

pytestmark = pytest.mark.unit

UTC = dt.timezone.utc
NY = ZoneInfo("America/New_York")
LONDON = ZoneInfo("Europe/London")
SECOND = dt.timedelta(seconds=1)


def spec(**fields: Any) -> TimeBasedSpotScheduleSpec:
    return TimeBasedSpotScheduleSpec.model_validate({"timezone": "America/New_York", **fields})


def window(days: str, start: str, end: str) -> dict[str, str]:
    return {"days": days, "start": start, "end": end}


def at(zone: ZoneInfo, y: int, mo: int, d: int, h: int = 0, mi: int = 0, fold: int = 0
       ) -> dt.datetime:
    return dt.datetime(y, mo, d, h, mi, tzinfo=zone, fold=fold)


def z(y: int, mo: int, d: int, h: int = 0, mi: int = 0) -> dt.datetime:
    return dt.datetime(y, mo, d, h, mi, tzinfo=UTC)


# --- the model and the CRD rules ---------------------------------------------------------------


@pytest.fixture(scope="module")
def checker() -> Checker:
    return Checker.compile([crd(builtin_provider(BuiltinProvider.TIME_BASED))], server=DEFAULT)


def tbss(spec_: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "TimeBasedSpotSchedule",
            "metadata": {"name": "office", "namespace": "agents"}, "spec": spec_}


SHAPES: list[tuple[str, dict[str, Any], str | None]] = [
    ("window", {"windows": [window("mon-fri", "09:30", "17:00")]}, None),
    ("overnight-window", {"windows": [window("fri", "22:00", "06:00")]}, None),
    ("whole-day-window", {"windows": [window("sat-sun", "00:00", "24:00")]}, None),
    ("empty-window", {"windows": [window("mon", "09:00", "09:00")]}, "start and end must differ"),
    ("start-24", {"windows": [window("mon", "24:00", "09:00")]}, "HH:MM on a 24-hour clock"),
    ("bad-days", {"windows": [window("monday", "09:00", "10:00")]}, "the days the window starts"),
    ("bad-clock", {"windows": [window("mon", "9:00", "10:00")]}, "HH:MM on a 24-hour clock"),
    ("open-range", {"openRanges": [{"start": "2026-12-24T08:00:00+01:00",
                                    "end": "2026-12-24T12:00:00+01:00"}]}, None),
    ("from-only", {"openRanges": [{"start": "2026-12-24T08:00:00Z"}]}, None),
    ("until-only", {"openRanges": [{"end": "2026-12-24T08:00:00.5-05:00"}]}, None),
    ("neither", {"openRanges": [{}]}, "give start, end or both"),
    ("reversed", {"openRanges": [{"start": "2026-12-24T08:00:00Z",
                                  "end": "2026-12-24T08:00:00+01:00"}]},
     "start must be earlier than end"),
    ("other-offsets-ordered", {"openRanges": [{"start": "2026-12-24T08:00:00+01:00",
                                               "end": "2026-12-24T07:30:00Z"}]}, None),
    ("no-zone", {"closed": {"ranges": [{"start": "2026-12-24T08:00:00"}]}}, None),
    ("lower-z", {"closed": {"ranges": [{"start": "2026-12-24t08:00:00z"}]}}, None),
    ("bad-day-of-month", {"closed": {"ranges": [{"end": "2026-02-30T08:00:00Z"}]}}, None),
    ("closed-dates", {"closed": {"dates": ["2026-12-24", "2026-12-31"]}}, None),
    ("closed-date-twice", {"closed": {"dates": ["2026-12-24", "2026-12-24"]}}, "listed twice"),
    ("closed-windows", {"closed": {"windows": [window("mon-fri", "12:00", "13:00")]}}, None),
    ("holidays", {"closed": {"holidays": [{"country": "GB", "subdivision": "ENG"},
                                          {"country": "US", "categories": ["public"]}]}}, None),
    ("country-shape", {"closed": {"holidays": [{"country": "gb"}]}}, "should match"),
    ("no-categories", {"closed": {"holidays": [{"country": "US", "categories": []}]}}, "at least 1"),
]
"""(name, spec, what both the model and the API server refuse it with; None: both accept). The
three `closed.ranges` entries whose verdict is the API server's alone are marked below."""

SERVER_ONLY: dict[str, str] = {
    "no-zone": "RFC 3339 instant with its zone",
    "lower-z": "RFC 3339 instant with its zone",
    "bad-day-of-month": "RFC 3339 instant with its zone",
}


@pytest.mark.parametrize(("name", "fields", "refused"), SHAPES, ids=[s[0] for s in SHAPES])
def test_the_model_and_the_crd_rules_decide_alike(checker: Checker, name: str,
                                                  fields: dict[str, Any], refused: str | None) -> None:
    verdict = checker.check(Request("CREATE", tbss(fields)))
    try:
        TimeBasedSpotScheduleSpec.model_validate(fields)
        model_error = None
    except ValidationError as error:
        model_error = str(error)
    expected = refused or SERVER_ONLY.get(name)
    if expected is None:
        assert verdict.allowed, verdict.status
        assert model_error is None
        return
    assert not verdict.allowed and model_error is not None
    if name in SERVER_ONLY:
        assert expected in model_error  # the server refuses by pattern, the model says why
    else:
        assert verdict.status is not None
        assert expected in verdict.status.message or expected in model_error


@pytest.mark.parametrize(("calendar", "why"), [
    ({"country": "XX"}, "has no country 'XX'"),
    ({"country": "GB", "subdivision": "XYZ"}, "no subdivision 'XYZ' of GB; known: ENG, NIR, SCT, WLS"),
    ({"country": "US", "categories": ["school"]}, "no holiday category 'school'"),
])
def test_a_calendar_the_library_does_not_know_is_admitted_but_invalid_for_the_provider(
        checker: Checker, calendar: dict[str, Any], why: str) -> None:
    fields = {"windows": [window("mon-fri", "09:00", "17:00")], "closed": {"holidays": [calendar]}}
    assert checker.check(Request("CREATE", tbss(fields))).allowed  # the CRD sees only the shape
    patch, requeue = tb.evaluate(fields, 3, None, z(2026, 12, 1, 12))
    assert patch is not None and requeue is None
    (ready, stalled) = patch["status"]["conditions"]
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert "spec.closed.holidays[0]" in ready["message"] and why in ready["message"]
    assert stalled["type"] == "Stalled"


def test_existing_objects_keep_their_schedule_and_gain_no_field(checker: Checker) -> None:
    legacy = {"daysOfWeek": ["mon-fri"], "hoursOfDay": ["9-17"], "timezone": "Europe/London"}
    verdict = checker.check(Request("CREATE", tbss(legacy)))
    assert verdict.allowed
    parsed = TimeBasedSpotScheduleSpec.model_validate(legacy)
    assert parsed.windows is None and parsed.open_ranges is None and parsed.closed is None
    assert parsed.model_dump(mode="json", by_alias=True, exclude_none=True) == {**legacy, "enabled": True}


# --- windows -----------------------------------------------------------------------------------


def test_a_minute_window_opens_and_closes_at_its_minutes() -> None:
    office = spec(windows=[window("mon-fri", "09:30", "17:15")])
    assert not tb.is_active(office, at(NY, 2026, 11, 30, 9, 29))
    assert tb.is_active(office, at(NY, 2026, 11, 30, 9, 30))
    assert tb.is_active(office, at(NY, 2026, 11, 30, 17, 14, ) + 59 * SECOND)
    assert not tb.is_active(office, at(NY, 2026, 11, 30, 17, 15))
    assert tb.next_transition(office, at(NY, 2026, 11, 30, 12)) == at(NY, 2026, 11, 30, 17, 15)
    assert tb.next_transition(office, at(NY, 2026, 12, 4, 18)) == at(NY, 2026, 12, 7, 9, 30)


def test_an_overnight_window_belongs_to_the_day_it_starts_on() -> None:
    nights = spec(windows=[window("fri", "22:00", "06:00")])
    assert tb.is_active(nights, at(NY, 2026, 12, 4, 22))  # Friday 22:00
    assert tb.is_active(nights, at(NY, 2026, 12, 5, 5, 59))  # Saturday 05:59
    assert not tb.is_active(nights, at(NY, 2026, 12, 5, 6))
    assert not tb.is_active(nights, at(NY, 2026, 12, 4, 5))  # Friday morning: Thursday's is not listed
    assert tb.next_transition(nights, at(NY, 2026, 12, 4, 23)) == at(NY, 2026, 12, 5, 6)


def test_the_5spot_form_keeps_its_independent_sets_beside_a_window() -> None:
    both = spec(daysOfWeek=["mon-fri"], hoursOfDay=["22-6"], windows=[window("fri", "22:00", "06:00")])
    legacy = spec(daysOfWeek=["mon-fri"], hoursOfDay=["22-6"])
    assert not tb.is_active(legacy, at(NY, 2026, 12, 5, 1))  # Saturday 01:00: 5-Spot stops at midnight
    assert tb.is_active(both, at(NY, 2026, 12, 5, 1))  # the window carries Friday night over
    assert tb.is_active(both, at(NY, 2026, 12, 1, 3))  # and the 5-Spot hours still count


def test_touching_windows_make_one_stretch_without_a_transition() -> None:
    week = spec(windows=[window("fri", "18:00", "24:00"), window("sat", "00:00", "24:00"),
                         window("sun", "00:00", "12:00")])
    assert tb.next_transition(week, at(NY, 2026, 12, 4, 19)) == at(NY, 2026, 12, 6, 12)


def test_closed_windows_cut_the_open_ones() -> None:
    lunch = spec(windows=[window("mon-fri", "09:00", "17:00")],
                 closed={"windows": [window("mon-fri", "12:00", "13:00")]})
    assert tb.is_active(lunch, at(NY, 2026, 11, 30, 11, 59))
    assert not tb.is_active(lunch, at(NY, 2026, 11, 30, 12, 30))
    assert tb.next_transition(lunch, at(NY, 2026, 11, 30, 12)) == at(NY, 2026, 11, 30, 13)


def test_a_downtime_alone_is_an_all_week_window_with_closed_windows() -> None:
    downtime = spec(windows=[window("mon-sun", "00:00", "24:00")],
                    closed={"windows": [window("mon-fri", "20:00", "07:00")]})
    assert not tb.is_active(downtime, at(NY, 2026, 12, 1, 3))  # Tuesday 03:00
    assert not tb.is_active(downtime, at(NY, 2026, 12, 5, 6))  # Saturday 06:00: Friday's downtime
    assert tb.is_active(downtime, at(NY, 2026, 12, 5, 7))
    assert not tb.is_active(downtime, at(NY, 2026, 11, 30, 20))
    assert tb.is_active(downtime, at(NY, 2026, 11, 30, 6, 59))  # Monday: Sunday has no downtime


# --- absolute ranges ---------------------------------------------------------------------------


def test_an_open_range_opens_the_schedule_outside_its_windows() -> None:
    release = spec(windows=[window("mon-fri", "09:00", "17:00")],
                   openRanges=[{"start": "2026-12-05T08:00:00-05:00", "end": "2026-12-05T14:00:00Z"}])
    assert not tb.is_active(release, at(NY, 2026, 12, 5, 7, 59))
    assert tb.is_active(release, at(NY, 2026, 12, 5, 8))
    assert not tb.is_active(release, z(2026, 12, 5, 14))
    assert tb.next_transition(release, at(NY, 2026, 12, 4, 18)) == at(NY, 2026, 12, 5, 8)
    assert tb.next_transition(release, at(NY, 2026, 12, 5, 8)) == z(2026, 12, 5, 14)


def test_an_open_ended_range_has_no_transition_after_its_start() -> None:
    from_then_on = spec(openRanges=[{"start": "2026-12-05T08:00:00Z"}])
    assert tb.next_transition(from_then_on, z(2026, 12, 1)) == z(2026, 12, 5, 8)
    assert tb.next_transition(from_then_on, z(2026, 12, 6)) is None
    assert tb.is_active(from_then_on, z(2030, 1, 1))
    until = spec(openRanges=[{"end": "2026-12-05T08:00:00Z"}])
    assert tb.is_active(until, z(2020, 1, 1)) and not tb.is_active(until, z(2026, 12, 5, 8))


def test_a_closed_range_wins_over_windows_and_open_ranges() -> None:
    freeze = spec(windows=[window("mon-sun", "00:00", "24:00")],
                  openRanges=[{"start": "2026-12-24T10:00:00Z", "end": "2026-12-24T11:00:00Z"}],
                  closed={"ranges": [{"start": "2026-12-20T00:00:00-05:00",
                                      "end": "2027-01-04T00:00:00-05:00"}]})
    assert not tb.is_active(freeze, z(2026, 12, 24, 10, 30))
    assert tb.next_transition(freeze, z(2026, 12, 19, 12)) == at(NY, 2026, 12, 20)
    assert tb.next_transition(freeze, z(2026, 12, 24)) == at(NY, 2027, 1, 4)


# --- holidays and dates ------------------------------------------------------------------------


def test_a_holiday_closes_its_whole_local_date_and_names_itself() -> None:
    london = spec(timezone="Europe/London", windows=[window("mon-sun", "00:00", "24:00")],
                  closed={"holidays": [{"country": "GB", "subdivision": "ENG"}]})
    assert tb.is_active(london, at(LONDON, 2026, 12, 24, 23, 59))
    assert not tb.is_active(london, at(LONDON, 2026, 12, 25))
    # Christmas, Boxing Day, and Boxing Day observed on Monday the 28th (the 26th is a Saturday).
    assert tb.next_transition(london, at(LONDON, 2026, 12, 25)) == at(LONDON, 2026, 12, 27)
    assert tb.next_transition(london, at(LONDON, 2026, 12, 27)) == at(LONDON, 2026, 12, 28)
    assert tb.next_transition(london, at(LONDON, 2026, 12, 28)) == at(LONDON, 2026, 12, 29)
    closures, problem = tb.closures(london, at(LONDON, 2026, 12, 20), at(LONDON, 2027, 1, 3))
    assert problem is None
    assert [(c.start, c.what) for c in closures] == [
        (at(LONDON, 2026, 12, 25), "Christmas Day (GB-ENG)"),
        (at(LONDON, 2026, 12, 26), "Boxing Day (GB-ENG)"),
        (at(LONDON, 2026, 12, 28), "Boxing Day (observed) (GB-ENG)"),
        (at(LONDON, 2027, 1, 1), "New Year's Day (GB-ENG)"),
    ]


def test_an_overnight_window_into_a_holiday_closes_at_its_midnight() -> None:
    shift = spec(timezone="Europe/London", windows=[window("thu", "22:00", "06:00")],
                 closed={"holidays": [{"country": "GB", "subdivision": "ENG"}]})
    assert tb.is_active(shift, at(LONDON, 2026, 12, 24, 23))  # Thursday night
    assert tb.next_transition(shift, at(LONDON, 2026, 12, 24, 23)) == at(LONDON, 2026, 12, 25)


def test_closed_dates_and_preview_marks_include_closed_ranges() -> None:
    office = spec(windows=[window("mon-fri", "09:00", "17:00")],
                  closed={"dates": ["2026-12-24"], "ranges": [{"start": "2026-12-30T12:00:00Z",
                                                              "end": "2026-12-31T12:00:00Z"}]})
    assert not tb.is_active(office, at(NY, 2026, 12, 24, 10))
    provider = timeline.Provider("TimeBasedSpotSchedule", "agents", "office",
                                 office.model_dump(by_alias=True, exclude_none=True))
    marked = timeline.timelines([provider], z(2026, 12, 20), until=z(2027, 1, 1))[provider.key]
    assert [(m.start, m.end, m.kind, m.label) for m in marked.marks] == [
        (at(NY, 2026, 12, 24), at(NY, 2026, 12, 25), "holiday", "closed.dates: closed"),
        (z(2026, 12, 30, 12), z(2026, 12, 31, 12), "holiday", "closed.ranges: closed"),
    ]


def _first_refused_year(country: str) -> int:
    """The first year from 2026 on that the installed holidays library only estimates for
    `country` (Singapore's Chinese New Year: 2028 in holidays 0.109, 2027 in 0.90)."""
    for year in range(2026, 2040):
        try:
            holiday_year(country, None, ("public",), year)
        except Unanswerable:
            return year
    raise AssertionError(f"{country}: no estimated year before 2040")


def test_a_year_the_library_only_estimates_is_refused_and_the_status_held() -> None:
    year = _first_refused_year("SG")
    fields = {"timezone": "Asia/Singapore", "windows": [window("mon-fri", "09:00", "18:00")],
              "closed": {"holidays": [{"country": "SG"}]}}
    singapore = spec(**fields)
    before = dt.datetime(year - 1, 12, 29, 3, tzinfo=UTC)  # 11:00 in Singapore, a weekday or not
    first_instant = dt.datetime(year - 1, 12, 31, 16, tzinfo=UTC)  # YEAR-01-01 00:00 +08
    decided = tb.decide(singapore, before)
    assert decided.ready and decided.requeue_at == first_instant
    assert decided.next_transition is None or decided.next_transition < first_instant
    with pytest.raises(Unanswerable, match=f"SG in {year}.*estimates"):
        tb.is_active(singapore, dt.datetime(year, 1, 3, 3, tzinfo=UTC))
    prior, _ = tb.evaluate(fields, 1, None, before)
    assert prior is not None
    held = prior["status"]["active"]
    patch, requeue = tb.evaluate(fields, 1, prior["status"], first_instant)
    assert patch is not None and requeue is None
    status = patch["status"]
    assert status["active"] is held and status["nextTransitionTime"] is None
    assert status["conditions"][0]["reason"] == "HolidaysUnknown"
    assert "refuses a year with an estimated date" in status["conditions"][0]["message"]


def test_an_override_holds_a_schedule_in_a_refused_year_and_hands_back_to_the_refusal() -> None:
    year = _first_refused_year("SG")
    now, until = dt.datetime(year, 1, 5, 3, tzinfo=UTC), dt.datetime(year, 1, 5, 6, tzinfo=UTC)
    written = until.isoformat().replace("+00:00", "Z")
    fields: dict[str, Any] = {"timezone": "Asia/Singapore", "windows": [window("mon-fri", "09:00", "18:00")],
              "closed": {"holidays": [{"country": "SG"}]},
              "override": {"active": True, "until": written}}
    patch, requeue = tb.evaluate(fields, 1, None, now)
    assert patch is not None and requeue == until
    status = patch["status"]
    ready = status["conditions"][0]
    assert status["active"] is True and status["overrideUntil"] == written
    assert (ready["status"], ready["reason"]) == ("True", "Overridden")
    assert "the schedule alone is undecided now (HolidaysUnknown" in ready["message"]
    assert status.get("nextTransitionTime") is None  # what follows the expiry cannot be foretold
    after, again = tb.evaluate(fields, 1, status, until)
    assert after is not None and again is None
    assert after["status"]["conditions"][0]["reason"] == "HolidaysUnknown"
    assert after["status"]["active"] is True  # held at its last value, as a refusal holds it
    provider = timeline.Provider("TimeBasedSpotSchedule", "agents", "sg", fields)
    held = timeline.timelines([provider], now, count=5)[provider.key]
    assert held.problem is None and held.initial is True and held.transitions == ()
    assert [m.kind for m in held.marks] == ["override"]


def test_a_preview_of_a_refused_year_says_why() -> None:
    year = _first_refused_year("SG")
    provider = timeline.Provider("TimeBasedSpotSchedule", "agents", "sg", {
        "timezone": "Asia/Singapore", "windows": [window("mon-fri", "09:00", "18:00")],
        "closed": {"holidays": [{"country": "SG"}]}})
    found = timeline.timelines([provider], z(year - 1, 12, 31), count=50)[provider.key]
    assert found.problem is None and found.transitions[-1][0] < z(year - 1, 12, 31, 16)
    refused = timeline.timelines([provider], z(year, 2, 1), count=5)[provider.key]
    assert refused.initial is None and refused.problem is not None and f"SG in {year}" in refused.problem
    closures, problem = tb.closures(TimeBasedSpotScheduleSpec.model_validate(provider.spec),
                                    z(year - 1, 12, 1), z(year, 2, 1))
    assert problem is not None and f"SG in {year}" in problem
    assert [c.what for c in closures] == ["Christmas Day (SG)"]
    # The preview's marks stop where the data does, as its timeline does.
    marked = timeline.timelines([provider], z(year - 1, 12, 1), until=z(year, 2, 1))[provider.key]
    assert [m.label for m in marked.marks] == ["Christmas Day (SG): closed"]


# --- daylight saving time ----------------------------------------------------------------------
# 2026: New York springs forward on Mar 8 (02:00 EST -> 03:00 EDT, 07:00Z) and falls back on
# Nov 1 (02:00 EDT -> 01:00 EST, 06:00Z); London on Mar 29 (01:00 -> 02:00, 01:00Z) and Oct 25
# (02:00 BST -> 01:00 GMT, 01:00Z); Sydney falls back on Apr 5 (03:00 AEDT -> 02:00 AEST, 16:00Z
# the day before) and springs forward on Oct 4 (02:00 -> 03:00, 16:00Z the day before); Santiago
# springs forward at midnight on Sep 6 (00:00 -04 -> 01:00 -03, 04:00Z); Lord Howe moves by half
# an hour (Oct 4: 02:00 -> 02:30, 15:30Z the day before).

DST_CASES = [
    # a window starting in the skipped hour opens when the gap ends
    ("America/New_York", window("sun", "02:30", "04:00"), z(2026, 3, 8, 6), z(2026, 3, 8, 7), z(2026, 3, 8, 8)),
    ("Europe/London", window("sun", "01:15", "03:00"), z(2026, 3, 29, 0), z(2026, 3, 29, 1), z(2026, 3, 29, 2)),
    ("Australia/Sydney", window("sun", "02:00", "02:45"), z(2026, 10, 3, 15), None, None),  # entirely skipped
    ("Australia/Lord_Howe", window("sun", "02:10", "03:00"), z(2026, 10, 3, 15), z(2026, 10, 3, 15, 30),
     z(2026, 10, 3, 16)),
    ("America/Santiago", window("sun", "00:00", "02:00"), z(2026, 9, 6, 3), z(2026, 9, 6, 4), z(2026, 9, 6, 5)),
    # a window ending in the repeated hour closes at its first occurrence
    ("America/New_York", window("sat", "23:00", "01:30"), z(2026, 11, 1, 2), z(2026, 11, 1, 3), z(2026, 11, 1, 5, 30)),
    ("Europe/London", window("sun", "00:30", "01:30"), z(2026, 10, 24, 23), z(2026, 10, 24, 23, 30),
     z(2026, 10, 25, 0, 30)),
    ("Australia/Sydney", window("sun", "01:00", "02:30"), z(2026, 4, 4, 13), z(2026, 4, 4, 14), z(2026, 4, 4, 15, 30)),
    # a window starting in the repeated hour opens at its first occurrence and runs through both
    ("America/New_York", window("sun", "01:30", "03:00"), z(2026, 11, 1, 5), z(2026, 11, 1, 5, 30), z(2026, 11, 1, 8)),
]


@pytest.mark.parametrize(("zone", "win", "before", "opens", "closes"), DST_CASES,
                         ids=[f"{c[0]}-{c[1]['start']}-{c[1]['end']}" for c in DST_CASES])
def test_windows_across_clock_changes_follow_the_zone_database(
        zone: str, win: dict[str, str], before: dt.datetime, opens: dt.datetime | None,
        closes: dt.datetime | None) -> None:
    schedule = spec(timezone=zone, windows=[win])
    first = tb.next_transition(schedule, before)
    if opens is None:
        assert first is None or first > before + dt.timedelta(days=6)  # next week's
        return
    assert first == opens and tb.is_active(schedule, opens)
    assert not tb.is_active(schedule, opens - SECOND)
    assert tb.next_transition(schedule, opens) == closes
    assert closes is not None
    assert tb.is_active(schedule, closes - SECOND) and not tb.is_active(schedule, closes)


def test_the_second_pass_through_a_repeated_hour_after_a_window_closed_stays_closed() -> None:
    ends_at_one_thirty = spec(windows=[window("sat", "23:00", "01:30")])
    assert tb.is_active(ends_at_one_thirty, at(NY, 2026, 11, 1, 1, 15, fold=0))
    assert not tb.is_active(ends_at_one_thirty, at(NY, 2026, 11, 1, 1, 15, fold=1))


def test_a_holiday_on_a_day_whose_midnight_is_skipped_starts_when_the_clock_jumps() -> None:
    chile = spec(timezone="America/Santiago", windows=[window("mon-sun", "00:00", "24:00")],
                 closed={"dates": ["2026-09-06"]})
    assert tb.next_transition(chile, z(2026, 9, 6, 3)) == z(2026, 9, 6, 4)
    assert tb.next_transition(chile, z(2026, 9, 6, 4)) == z(2026, 9, 7, 3)


# --- properties --------------------------------------------------------------------------------

ZONES = ["UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kathmandu",
         "America/St_Johns", "America/Santiago", "Australia/Sydney", "Pacific/Chatham"]
CLOCKS = st.builds(lambda h, m: f"{h:02d}:{m:02d}", st.integers(0, 23), st.sampled_from([0, 1, 15, 30, 59]))
DAYS = st.sampled_from(["mon", "tue", "wed", "thu", "fri", "sat", "sun", "mon-fri", "fri-mon", "sat-sun"])
windows_ = st.lists(st.builds(window, DAYS, CLOCKS, st.one_of(CLOCKS, st.just("24:00"))).filter(
    lambda w: w["start"] != w["end"]), max_size=3)
instants = st.datetimes(min_value=dt.datetime(2026, 1, 1), max_value=dt.datetime(2028, 12, 31),
                        timezones=st.just(UTC))


def _range(a: dt.datetime, hours: int) -> dict[str, str]:
    return {"start": a.isoformat(), "end": (a + dt.timedelta(hours=hours)).isoformat()}


@st.composite
def schedules(draw: st.DrawFn, zones: list[str] = ZONES) -> TimeBasedSpotScheduleSpec:
    fields: dict[str, Any] = {"timezone": draw(st.sampled_from(zones)), "windows": draw(windows_)}
    closed: dict[str, Any] = {}
    if draw(st.booleans()):
        closed["windows"] = draw(windows_)
    if draw(st.booleans()):
        closed["holidays"] = [draw(st.sampled_from([{"country": "GB", "subdivision": "ENG"},
                                                    {"country": "US"}, {"country": "DE", "subdivision": "BY"}]))]
    if draw(st.booleans()):
        closed["ranges"] = [_range(draw(instants), draw(st.integers(1, 200)))]
    if closed:
        fields["closed"] = closed
    if draw(st.booleans()):
        fields["openRanges"] = [_range(draw(instants), draw(st.integers(1, 200)))]
    return TimeBasedSpotScheduleSpec.model_validate(fields)


@settings(max_examples=200, deadline=None)
@given(schedules(), instants, st.lists(st.floats(0, 1, exclude_max=True), min_size=3, max_size=3))
def test_activity_is_constant_until_the_next_transition_and_flips_exactly_there(
        schedule: TimeBasedSpotScheduleSpec, now: dt.datetime, fractions: list[float]) -> None:
    state = tb.is_active(schedule, now)
    following = tb.next_transition(schedule, now)
    if following is None:
        for days in (1, 3, 7, 8):
            assert tb.is_active(schedule, now + dt.timedelta(days=days, minutes=days)) is state
        return
    assert following > now
    for fraction in fractions:
        assert tb.is_active(schedule, min(now + (following - now) * fraction,
                                          following - dt.timedelta(microseconds=1))) is state
    assert tb.is_active(schedule, following - dt.timedelta(microseconds=1)) is state
    assert tb.is_active(schedule, following) is not state


def _steady(zone: ZoneInfo, now: dt.datetime) -> bool:
    """No clock change within a day either side: the wall clock alone decides there."""
    offsets = {(now + dt.timedelta(hours=h)).astimezone(zone).utcoffset() for h in range(-30, 31, 2)}
    return len(offsets) == 1


@settings(max_examples=300, deadline=None)
@given(schedules(["UTC", "America/New_York", "Europe/London", "Asia/Kathmandu", "America/St_Johns"]),
       instants)
def test_away_from_clock_changes_activity_is_the_wall_clock_rule(
        schedule: TimeBasedSpotScheduleSpec, now: dt.datetime) -> None:
    zone = schedule.zone
    if not _steady(zone, now):
        return
    local = now.astimezone(zone)
    minute = local.hour * 60 + local.minute
    yesterday = (local.weekday() - 1) % 7

    def in_windows(items: Any) -> bool:
        for w in items or ():
            start, end = w.minutes
            days = parse_days([w.days])
            if local.weekday() in days and start <= minute < min(end, 1440):
                return True
            if yesterday in days and end > 1440 and minute < end - 1440:
                return True
        return False

    closed = schedule.closed
    in_range = any(_within(r, now) for r in schedule.open_ranges or ())
    shut = closed is not None and (
        in_windows(closed.windows)
        or any(_within(r, now) for r in closed.ranges or ())
        or any(_library_holiday(c.country, c.subdivision, local.date()) for c in closed.holidays or ()))
    assert tb.is_active(schedule, now) is ((in_windows(schedule.windows) or in_range) and not shut)


def _within(given: AbsoluteRange, now: dt.datetime) -> bool:
    start, end = given.instants
    return (start is None or start <= now) and (end is None or now < end)


def _library_holiday(country: str, subdivision: str | None, day: dt.date) -> bool:
    import holidays

    return day in holidays.country_holidays(country, subdiv=subdivision, years=day.year)
