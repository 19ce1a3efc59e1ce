"""`fivespot schedule preview -o svg|html`: the week's picture is drawn from the very report the
table prints, deterministically, self-contained and labelled; a composite's children are drawn
under it, marks in their strip. Where Chromium actually puts each bar and mark is checked in
tests/docs/test_schedule_picture.py."""

from __future__ import annotations

import datetime as dt
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from fivespot.controllers.spotschedules.marks import MARK_KINDS, Mark
from fivespot.controllers.spotschedules.timeline import Provider, timelines
from fivespot.cli import picture
from fivespot.cli.main import main

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent-sandbox"
THANKSGIVING = [str(EXAMPLE / "tenant"), "--config", str(EXAMPLE / "config"),
                "--from", "2026-11-23T00:00:00-05:00"]
OVERRIDE = [str(ROOT / "examples" / "schedule-override"), "--from", "2026-11-24T18:00:00Z",
            "--until", "2026-11-26T18:00:00Z"]
SVG = "{http://www.w3.org/2000/svg}"
UTC = dt.timezone.utc


def _out(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["schedule", "preview", *args]) == 0
    return capsys.readouterr().out


def _report(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    return dict(json.loads(_out(capsys, *args, "-o", "json")))


def test_the_picture_is_the_same_bytes_every_time_and_well_formed(
        capsys: pytest.CaptureFixture[str]) -> None:
    first = _out(capsys, *THANKSGIVING, "-o", "svg")
    assert first == _out(capsys, *THANKSGIVING, "-o", "svg")
    root = ET.fromstring(first)
    assert root.tag == f"{SVG}svg" and root.get("role") == "img"
    assert root.get("data-from") == "2026-11-23T05:00:00Z"
    assert root.get("data-until") == "2026-11-30T05:00:00Z"  # a week unless --until says otherwise


def test_the_picture_is_self_contained(capsys: pytest.CaptureFixture[str]) -> None:
    for output in ("svg", "html"):
        text = _out(capsys, *THANKSGIVING, "-o", output)
        assert "<script" not in text and "href" not in text and "@import" not in text
        addresses = set(re.findall(r"https?://[^\s\"'<>]+", text))
        assert addresses <= {"http://www.w3.org/2000/svg"}, addresses


def test_every_row_bar_and_mark_is_labelled_for_a_screen_reader(
        capsys: pytest.CaptureFixture[str]) -> None:
    root = ET.fromstring(_out(capsys, *THANKSGIVING, "-o", "svg"))
    title, desc = root.find(f"{SVG}title"), root.find(f"{SVG}desc")
    assert title is not None and title.text == \
        "Schedules from Mon 23 Nov 05:00 to Mon 30 Nov 05:00 (UTC)"  # mixed zones: UTC
    labelled = root.get("aria-labelledby", "").split()
    assert title.get("id") in labelled and desc is not None and desc.get("id") in labelled
    shapes = root.findall(f".//{SVG}rect[@class]")
    assert shapes and all(shape.find(f"{SVG}title") is not None for shape in shapes)
    assert all(row.find(f"{SVG}title") is not None for row in root.iter(f"{SVG}g")
               if row.get("class") == "row")


def test_rows_are_the_reports_schedules_with_a_composites_children_under_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    report = _report(capsys, *THANKSGIVING, "--until", "2026-11-30T00:00:00-05:00")
    drawn = [(row.depth, row.name) for row in picture.rows(report)]
    assert drawn == [
        (0, "CapitalMarketsSchedule agents/nyse"),
        (0, "CompositeSchedule agents/desk"),
        (1, "TimeBasedSpotSchedule agents/office-hours"),
        (1, "ManualSchedule agents/override"),
        (1, "ManualSchedule agents/freeze"),
    ]


def test_each_bar_starts_and_ends_where_the_report_says_the_schedule_flips(
        capsys: pytest.CaptureFixture[str]) -> None:
    args = [*THANKSGIVING, "--timezone", "America/New_York"]
    report = _report(capsys, *args, "--until", "2026-11-30T00:00:00-05:00")
    root = ET.fromstring(_out(capsys, *args, "-o", "svg"))
    for row in root.iter(f"{SVG}g"):
        if row.get("class") != "row":
            continue
        schedule = next(s for s in report["schedules"] if s["name"] == row.get("data-name"))
        bars = [(rect.get("data-start"), rect.get("data-state")) for rect in row
                if rect.get("class") == "state"]
        expected = [(schedule["now"]["at"], schedule["now"]["state"])] + [
            (t["at"], t["state"]) for t in schedule["transitions"]]
        assert bars == expected, schedule["name"]
        for rect in row:
            if rect.get("class") == "state":
                start = dt.datetime.fromisoformat(str(rect.get("data-start")).replace("Z", "+00:00"))
                assert float(str(rect.get("x"))) == pytest.approx(picture.x_of(report, start), abs=0.01)


def test_the_calendars_holiday_and_early_close_are_marked_where_the_table_lists_them(
        capsys: pytest.CaptureFixture[str]) -> None:
    table = _out(capsys, *THANKSGIVING, "--until", "2026-11-30T00:00:00-05:00")
    assert "  mark 2026-11-26 00:00 -05:00 to 2026-11-27 00:00 -05:00  holiday 2026-11-26: closed" \
        in table
    assert ("  mark 2026-11-27 13:00 -05:00 to 2026-11-27 16:00 -05:00  early close 2026-11-27: "
            "closed from 13:00") in table
    root = ET.fromstring(_out(capsys, *THANKSGIVING, "-o", "svg"))
    marks = sorted((str(r.get("data-kind")), str(r.get("data-start")), str(r.get("data-end")))
                   for r in root.iter(f"{SVG}rect") if r.get("class") == "mark")
    assert marks == [("early-close", "2026-11-27T18:00:00Z", "2026-11-27T21:00:00Z"),
                     ("holiday", "2026-11-26T05:00:00Z", "2026-11-27T05:00:00Z")]


LONDON_OFFICE = """\
apiVersion: spotschedules.5spot.finos.org/v1alpha1
kind: TimeBasedSpotSchedule
metadata: {name: london-office, namespace: agents}
spec:
  timezone: Europe/London
  windows: [{days: mon-fri, start: "09:00", end: "17:00"}]
  closed:
    holidays: [{country: GB, subdivision: ENG}]
    dates: ["2026-12-24"]
"""


def test_a_weekly_schedules_public_holidays_and_closed_dates_are_marked_in_the_table_json_and_picture(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "office.yaml").write_text(LONDON_OFFICE)
    args = [str(tmp_path), "--from", "2026-12-21T00:00:00Z", "--until", "2026-12-30T00:00:00Z"]
    table = _out(capsys, *args)
    assert ("  mark 2026-12-25 00:00 +00:00 to 2026-12-26 00:00 +00:00  Christmas Day (GB-ENG): "
            "closed") in table
    report = _report(capsys, *args)
    [office] = report["schedules"]
    closed = [("holiday", "2026-12-24T00:00:00Z", "2026-12-25T00:00:00Z", "closed.dates: closed"),
              ("holiday", "2026-12-25T00:00:00Z", "2026-12-26T00:00:00Z", "Christmas Day (GB-ENG): closed"),
              ("holiday", "2026-12-26T00:00:00Z", "2026-12-27T00:00:00Z", "Boxing Day (GB-ENG): closed"),
              ("holiday", "2026-12-28T00:00:00Z", "2026-12-29T00:00:00Z",
               "Boxing Day (observed) (GB-ENG): closed")]
    assert [(m["kind"], m["start"], m["end"], m["label"]) for m in office["marks"]] == closed
    # The marks are why the bars stay off: after Wednesday's close the next open is Tuesday 29th.
    flips = [(t["at"], t["state"]) for t in office["transitions"]]
    assert flips[-3:] == [("2026-12-23T17:00:00Z", "inactive"), ("2026-12-29T09:00:00Z", "active"),
                          ("2026-12-29T17:00:00Z", "inactive")]
    root = ET.fromstring(_out(capsys, *args, "-o", "svg"))
    drawn = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "mark"]
    assert sorted((str(r.get("data-kind")), str(r.get("data-start")), str(r.get("data-end")))
                  for r in drawn) == [c[:3] for c in closed]
    titles = " ".join(str(r.findtext(f"{SVG}title")) for r in drawn)
    assert all(label in titles for *_, label in closed)
    assert "holiday: closed all day" in ET.tostring(root, encoding="unicode")  # the legend


def test_an_override_is_marked_and_drawn_on_until_its_expiry(capsys: pytest.CaptureFixture[str]) -> None:
    report = _report(capsys, *OVERRIDE)
    office = next(s for s in report["schedules"] if s["name"] == "office-hours")
    assert office["now"]["state"] == "active"
    assert office["transitions"][0] == {**office["transitions"][0], "at": "2026-11-24T21:00:00Z",
                                        "state": "inactive"}
    assert office["marks"] == [{"kind": "override", "label": "override: active until 2026-11-24T21:00:00Z",
                                "start": "2026-11-24T18:00:00Z", "end": "2026-11-24T21:00:00Z",
                                "startLocal": "2026-11-24T18:00:00+00:00",
                                "endLocal": "2026-11-24T21:00:00+00:00"}]
    desk = next(s for s in report["schedules"] if s["name"] == "desk")
    assert desk["now"]["state"] == "active"  # anyOf(office-hours held on, ...) and not freeze
    assert desk["transitions"][0]["at"] == "2026-11-24T21:00:00Z"
    svg = _out(capsys, *OVERRIDE, "-o", "svg")
    assert 'class="mark" data-kind="override"' in svg
    assert "override: spec.override holds it" in svg  # the legend names what is used


def test_a_composites_own_override_holds_it_whatever_its_children_say() -> None:
    start = dt.datetime(2026, 3, 2, 19, tzinfo=UTC)
    ref = {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "ManualSchedule"}
    found = timelines([
        Provider("ManualSchedule", "t", "on", {"enabled": True}),
        Provider("CompositeSchedule", "t", "c", {"not": {**ref, "name": "on"},
                                                 "override": {"active": True,
                                                              "until": "2026-03-02T20:00:00Z"}}),
    ], start, until=start + dt.timedelta(days=1))
    own = found[("t", "spotschedules.5spot.finos.org", "CompositeSchedule", "c")]
    assert own.initial is True
    assert own.transitions == ((dt.datetime(2026, 3, 2, 20, tzinfo=UTC), False),)
    assert [m.kind for m in own.marks] == ["override"]


def test_the_html_page_holds_the_picture_and_the_same_report_as_text(
        capsys: pytest.CaptureFixture[str]) -> None:
    page = _out(capsys, *OVERRIDE, "-o", "html")
    table = _out(capsys, *OVERRIDE)
    assert page.startswith("<!DOCTYPE html>") and '<html lang="en">' in page
    assert "<svg" in page and page.count("<svg") == 1
    assert "CompositeSchedule agents/desk (Europe/London)" in page
    assert table.splitlines()[2].replace(">", "&gt;") in page


def test_every_mark_kind_has_a_colour_and_marks_meet_their_window() -> None:
    assert set(MARK_KINDS) <= set(picture.COLOURS)
    start = dt.datetime(2026, 3, 2, tzinfo=UTC)
    mark = Mark(start, start + dt.timedelta(hours=1), "holiday", "x")
    assert mark.overlaps(start, start) and not mark.overlaps(start + dt.timedelta(hours=1),
                                                             start + dt.timedelta(hours=2))


def test_a_picture_without_a_window_or_with_a_bad_zone_is_refused_clearly(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="needs the report of a window"):
        picture.svg({"from": "2026-03-02T00:00:00Z", "until": None, "schedules": []}, "UTC")
    with pytest.raises(SystemExit) as refused:
        main(["schedule", "preview", *OVERRIDE, "-o", "svg", "--timezone", "Mars/Olympus"])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert "--timezone: must be an IANA time zone name" in err and "Traceback" not in err
