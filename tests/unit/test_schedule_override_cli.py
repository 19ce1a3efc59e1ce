"""`fivespot schedule override`: what NAME names, when `--for` and `--until` end, the patch it
sends and what it prints are pure decisions, checked here with an injected instant; bad input is
one clear line and exit 2 before any cluster is contacted. The command against a real API server
and provider is tests/integration/test_schedule_override.py."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from fivespot.api.providers import CAPITAL_MARKETS_SCHEDULE, COMPOSITE_SCHEDULE, MANUAL_SCHEDULE, TIME_BASED_SPOT_SCHEDULE
from fivespot.cli.main import main
from fivespot.cli.override import (
    Reference,
    Refused,
    parse_duration,
    parse_reference,
    patch,
    resolve_until,
    summary,
)

pytestmark = pytest.mark.unit

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 3, 27, 17, 59, 30, 250000, tzinfo=UTC)  # a Friday, London still GMT


@pytest.mark.parametrize(("text", "length"), [
    ("3h", dt.timedelta(hours=3)), ("90m", dt.timedelta(minutes=90)),
    ("1h30m", dt.timedelta(minutes=90)), ("45s", dt.timedelta(seconds=45)),
    ("2d", dt.timedelta(days=2)), ("1d2h3m4s", dt.timedelta(days=1, hours=2, minutes=3, seconds=4)),
    ("366d", dt.timedelta(days=366)),
])
def test_a_duration_is_days_hours_minutes_and_seconds(text: str, length: dt.timedelta) -> None:
    assert parse_duration(text) == length


@pytest.mark.parametrize(("text", "why"), [
    ("", "not a duration"), ("3", "not a duration"), ("3 h", "not a duration"),
    ("-3h", "not a duration"), ("1.5h", "not a duration"), ("3h2d", "not a duration"),
    ("0h", "longer than zero"), ("367d", "longer than 366 days"),
])
def test_a_bad_duration_says_what_a_good_one_looks_like(text: str, why: str) -> None:
    with pytest.raises(Refused, match=why):
        parse_duration(text)


def test_for_counts_from_now_to_the_whole_second() -> None:
    ends = resolve_until(NOW, duration="3h", until=None, zone="UTC")
    assert ends == dt.datetime(2026, 3, 27, 20, 59, 30, tzinfo=UTC)


@pytest.mark.parametrize(("until", "zone", "ends"), [
    ("2026-03-27T22:00:00+01:00", "UTC", dt.datetime(2026, 3, 27, 21, tzinfo=UTC)),
    ("22:00", "Europe/London", dt.datetime(2026, 3, 27, 22, tzinfo=UTC)),  # today, GMT
    ("17:00", "Europe/London", dt.datetime(2026, 3, 28, 17, tzinfo=UTC)),  # past today: tomorrow
    ("22:00", "America/New_York", dt.datetime(2026, 3, 28, 2, tzinfo=UTC)),  # EDT
    ("09:00", "Europe/London", dt.datetime(2026, 3, 28, 9, tzinfo=UTC)),
])
def test_until_is_an_instant_or_the_next_such_time_on_the_schedules_clock(
        until: str, zone: str, ends: dt.datetime) -> None:
    assert resolve_until(NOW, duration=None, until=until, zone=zone) == ends


def test_until_hh_mm_skips_a_time_the_clock_jumps_over() -> None:
    # Sunday 29 March 2026 01:30 does not exist in London: the next 01:30 is Monday's.
    saturday = dt.datetime(2026, 3, 28, 2, tzinfo=UTC)
    assert resolve_until(saturday, duration=None, until="01:30", zone="Europe/London") == \
        dt.datetime(2026, 3, 30, 0, 30, tzinfo=UTC)


@pytest.mark.parametrize(("until", "why"), [
    ("2026-03-27T17:00:00Z", "not in the future"), ("tomorrow", "neither an RFC 3339 instant"),
    ("2026-03-27T22:00:00", "neither an RFC 3339 instant"), ("25:00", "neither an RFC 3339"),
    ("2028-03-27T22:00:00Z", "more than 366 days away"),
])
def test_a_bad_until_is_refused_with_the_reason(until: str, why: str) -> None:
    with pytest.raises(Refused, match=why):
        resolve_until(NOW, duration=None, until=until, zone="UTC")


@pytest.mark.parametrize(("text", "reference"), [
    ("office-hours", Reference("office-hours")),
    ("tbss/office-hours", Reference("office-hours", TIME_BASED_SPOT_SCHEDULE)),
    ("TimeBasedSpotSchedule/office-hours", Reference("office-hours", TIME_BASED_SPOT_SCHEDULE)),
    ("timebasedspotschedules/office-hours", Reference("office-hours", TIME_BASED_SPOT_SCHEDULE)),
    ("cms/nyse", Reference("nyse", CAPITAL_MARKETS_SCHEDULE)),
    ("ms/desk", Reference("desk", MANUAL_SCHEDULE)),
    ("manualschedule/desk", Reference("desk", MANUAL_SCHEDULE)),
    ("csch/desk", Reference("desk", COMPOSITE_SCHEDULE)),
    ("scap/desk-pool", Reference("desk-pool", scheduled_capacity=True)),
    ("ScheduledCapacity/desk-pool", Reference("desk-pool", scheduled_capacity=True)),
])
def test_name_is_a_kind_as_kubectl_names_it_and_a_name(text: str, reference: Reference) -> None:
    assert parse_reference(text) == reference


@pytest.mark.parametrize(("text", "why"), [
    ("deploy/web", "not a built-in schedule kind"), ("desktoggle/x", "only the built-in kinds"),
    ("tbss/", "names no object"), ("/x", "names no object"), ("", "names no object"),
])
def test_a_name_the_command_cannot_override_says_why(text: str, why: str) -> None:
    with pytest.raises(Refused, match=why):
        parse_reference(text)


def test_the_patch_sets_or_deletes_only_spec_override() -> None:
    ends = dt.datetime(2026, 3, 27, 21, tzinfo=UTC)
    assert patch(True, ends) == {"spec": {"override": {"active": True, "until": "2026-03-27T21:00:00Z"}}}
    assert patch(False, ends)["spec"]["override"]["active"] is False
    assert patch(None, None) == {"spec": {"override": None}}


def test_what_it_prints_names_the_schedule_the_expiry_and_who_follows() -> None:
    ends = dt.datetime(2026, 3, 27, 20, 59, 30, tzinfo=UTC)
    printed = summary("TimeBasedSpotSchedule", "agents", "office-hours", active=True, until=ends,
                      zone="Europe/London", now=NOW, followers=["agents/desk-pool"], previous=None,
                      via="ScheduledCapacity agents/desk-pool")
    assert printed == (
        "ScheduledCapacity agents/desk-pool follows TimeBasedSpotSchedule agents/office-hours\n"
        "TimeBasedSpotSchedule agents/office-hours: held on until 2026-03-27T20:59:30Z "
        "(Fri 27 Mar 20:59 GMT, in 3h); the provider hands back to the schedule then.\n"
        "Followed by: ScheduledCapacity agents/desk-pool\n")
    cleared = summary("ManualSchedule", "agents", "desk", active=None, until=None, zone="UTC",
                      now=NOW, followers=None,
                      previous={"active": False, "until": "2026-03-27T21:00:00Z"})
    assert cleared == ("ManualSchedule agents/desk: override cleared (was off until "
                       "2026-03-27T21:00:00Z); the schedule decides again.\n")


@pytest.mark.parametrize(("argv", "message"), [
    (["tbss/x", "--on"], "--on and --off need --for DURATION or --until TIME"),
    (["tbss/x", "--clear", "--for", "3h"], "--clear takes neither --for nor --until"),
    (["tbss/x", "--on", "--for", "three hours"], "--for 'three hours' is not a duration"),
    (["deploy/web", "--off", "--for", "1h"], "'deploy' is not a built-in schedule kind"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_cluster_is_asked(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    assert main(["schedule", "override", *argv, "--kubeconfig", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"fivespot schedule override: {message}" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_missing_kubeconfig_is_exit_2_naming_it(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    assert main(["schedule", "override", "tbss/x", "--on", "--for", "3h",
                 "--kubeconfig", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"no kubeconfig: {missing} does not exist" in err and "Traceback" not in err


def test_on_off_and_clear_are_one_choice(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["schedule", "override", "tbss/x", "--on", "--off", "--for", "3h"])
    assert refused.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
