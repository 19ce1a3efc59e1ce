"""The week's picture of `fivespot schedule preview -o svg|html`: one row per schedule, on and off
along a shared time axis, a composite's children under it, marks (holidays, early closes, an
override...) beneath each bar.

It is drawn from the preview's report, the same data the table and the JSON print, so the picture
cannot say anything the text does not. The output is a pure function of the report and the axis
zone: no clock, no randomness, fixed number formatting, so the same input gives the same bytes
(the docs build embeds it, and a test compares positions). It is self-contained (no script, no
font, no external reference) and readable without colour: every row and every bar and mark has
a `<title>` a screen reader announces, the whole has a `<title>` and `<desc>`, and the legend
names each colour.

Geometry is exported (`x_of`, `row_top`, `BAR`, `MARKS`) so a test can find where Chromium drew
what the text preview says.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any, Final
from zoneinfo import ZoneInfo

from fivespot.controllers.spotschedules.marks import MARK_KINDS

WIDTH: Final = 1200
LABEL_WIDTH: Final = 330
RIGHT: Final = 16
TOP: Final = 64
"""The title line and the axis labels above the first row."""
ROW_HEIGHT: Final = 36
BAR: Final = (6, 22)
"""The on/off bar's [top, bottom) inside a row, in pixels from the row's top."""
MARKS: Final = (25, 33)
"""The marks' strip [top, bottom) inside a row."""
INDENT: Final = 18
LEGEND_HEIGHT: Final = 56
MAX_LABEL: Final = 44

COLOURS: Final[Mapping[str, str]] = {
    "active": "#1b7f5a",
    "inactive": "#e6e9ed",
    "unresolved": "#9aa0a6",
    "holiday": "#c0392b",
    "early-close": "#d35400",
    "late-open": "#b9770e",
    "special-session": "#2471a3",
    "override": "#7d3c98",
}
"""Every fill the picture uses, by state or mark kind (the legend shows each one drawn)."""
GRID: Final = "#c9ced6"
INK: Final = "#1f2328"

_UTC: Final = dt.timezone.utc


def _instant(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def window(report: Mapping[str, Any]) -> tuple[dt.datetime, dt.datetime]:
    """The drawn window: the report's `from` to its `until`."""
    if report.get("until") is None:
        raise ValueError("a picture needs the report of a window (--until), not of --count")
    return _instant(report["from"]), _instant(report["until"])


def x_of(report: Mapping[str, Any], instant: dt.datetime) -> float:
    """The horizontal position of `instant` in the picture of `report`."""
    start, end = window(report)
    span = (end - start).total_seconds()
    share = min(max((instant - start).total_seconds() / span, 0.0), 1.0)
    return LABEL_WIDTH + share * (WIDTH - LABEL_WIDTH - RIGHT)


def row_top(index: int) -> int:
    """The top of row `index` (0: the first)."""
    return TOP + index * ROW_HEIGHT


@dataclass(frozen=True)
class Row:
    """One row: a schedule of the report (None: a child not among the objects given), how deep
    under composites it is drawn, and its name."""

    schedule: Mapping[str, Any] | None
    depth: int
    name: str


def _key(schedule: Mapping[str, Any]) -> tuple[str, str, str]:
    return schedule["namespace"], schedule["kind"], schedule["name"]


def rows(report: Mapping[str, Any]) -> list[Row]:
    """The rows in drawing order: each schedule no composite names, then (recursively) each
    composite's children under it; a schedule named only inside a cycle is drawn at the top."""
    schedules = list(report["schedules"])
    by_key = {_key(s): s for s in schedules}
    named = {(s["namespace"], *child.split("/", 1)) for s in schedules for child in s["children"]}
    found: list[Row] = []
    drawn: set[tuple[str, str, str]] = set()

    def walk(schedule: Mapping[str, Any], depth: int, path: tuple[tuple[str, str, str], ...]) -> None:
        key = _key(schedule)
        drawn.add(key)
        found.append(Row(schedule, depth, f"{schedule['kind']} {schedule['namespace']}/"
                                          f"{schedule['name']}"))
        for child in schedule["children"]:
            kind, name = child.split("/", 1)
            child_key = (schedule["namespace"], kind, name)
            if child_key in path:
                continue
            if child_key in by_key:
                walk(by_key[child_key], depth + 1, (*path, key))
            else:
                found.append(Row(None, depth + 1, f"{kind} {schedule['namespace']}/{name}"))

    for schedule in schedules:
        if _key(schedule) not in named:
            walk(schedule, 0, ())
    for schedule in schedules:
        if _key(schedule) not in drawn:
            walk(schedule, 0, ())
    return found


def shared_zone(report: Mapping[str, Any]) -> str:
    """The zone every schedule of the report is in, else UTC."""
    zones = {s["timezone"] for s in report["schedules"]}
    return zones.pop() if len(zones) == 1 else "UTC"


def intervals(schedule: Mapping[str, Any], end: dt.datetime
              ) -> Iterator[tuple[dt.datetime, dt.datetime, str]]:
    """The schedule's states as (start, end, state) intervals from the report's rows."""
    when, state = _instant(schedule["now"]["at"]), schedule["now"]["state"]
    for row in schedule["transitions"]:
        at = _instant(row["at"])
        if at > when:
            yield when, min(at, end), state
        when, state = at, row["state"]
    if end > when:
        yield when, end, state


def _f(value: float) -> str:
    """A coordinate, two decimals at most, the same text for the same value."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _local(instant: dt.datetime, zone: ZoneInfo) -> str:
    return instant.astimezone(zone).strftime("%a %d %b %H:%M")


def _ticks(start: dt.datetime, end: dt.datetime, zone: ZoneInfo
           ) -> Iterator[tuple[dt.datetime, bool]]:
    """Local midnights (True) and 06:00, 12:00, 18:00 (False) within the window."""
    day = start.astimezone(zone).date()
    while True:
        for hour in (0, 6, 12, 18):
            local = dt.datetime.combine(day, dt.time(hour)).replace(tzinfo=zone)
            instant = local.astimezone(_UTC)
            if instant > end:
                return
            if instant >= start:
                yield instant, hour == 0
        day += dt.timedelta(days=1)


def _label(text: str) -> str:
    return text if len(text) <= MAX_LABEL else text[:MAX_LABEL - 1] + "…"


def _patterns(prefix: str) -> str:
    return (f'<defs><pattern id="{prefix}-hatch" width="6" height="6" '
            'patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
            f'<rect width="6" height="6" fill="{COLOURS["inactive"]}"/>'
            f'<rect width="3" height="6" fill="{COLOURS["unresolved"]}"/></pattern></defs>')


def _fill(state: str, prefix: str) -> str:
    return f"url(#{prefix}-hatch)" if state == "unresolved" else COLOURS[state]


def svg(report: Mapping[str, Any], zone_name: str, *, prefix: str = "fivespot-week") -> str:
    """The picture of a windowed report as one SVG element, the axis in `zone_name`. `prefix`
    makes its ids unique when several pictures share a page."""
    start, end = window(report)
    zone = ZoneInfo(zone_name)
    drawn = rows(report)
    plot_bottom = row_top(len(drawn))
    height = plot_bottom + LEGEND_HEIGHT
    title = (f"Schedules from {_local(start, zone)} to {_local(end, zone)} ({zone_name})")
    parts: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" style="max-width:100%;height:auto" role="img" '
        f'aria-labelledby="{prefix}-title '
        f'{prefix}-desc" font-family="sans-serif" font-size="12" '
        f'data-from="{report["from"]}" data-until="{report["until"]}" data-zone="{escape(zone_name)}">',
        f'<title id="{prefix}-title">{escape(title)}</title>',
        f'<desc id="{prefix}-desc">One row per schedule: a filled bar while it is active, pale '
        f'while inactive, hatched while unresolved; the strip under a bar marks holidays, early '
        f'closes, late opens, special sessions and overrides. A composite\'s children are '
        f'indented under it. Times on the axis are in {escape(zone_name)}.</desc>',
        _patterns(prefix),
        f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        f'<text x="8" y="20" font-size="14" font-weight="bold" fill="{INK}">{escape(title)}</text>',
    ]
    for instant, midnight in _ticks(start, end, zone):
        x = _f(x_of(report, instant))
        parts.append(f'<line x1="{x}" y1="{TOP - 8}" x2="{x}" y2="{plot_bottom}" stroke="{GRID}" '
                     f'stroke-width="{1 if midnight else 0.5}"/>')
        if midnight and x_of(report, instant) < WIDTH - RIGHT - 72:
            parts.append(f'<text x="{_f(x_of(report, instant) + 3)}" y="{TOP - 12}" '
                         f'fill="{INK}">{instant.astimezone(zone).strftime("%a %d %b")}</text>')
    for index, row in enumerate(drawn):
        parts += _row(report, row, row_top(index), end, prefix)
    parts += _legend(report, plot_bottom + 12, prefix)
    parts.append("</svg>")
    return "".join(parts)


def _row(report: Mapping[str, Any], row: Row, top: int, end: dt.datetime, prefix: str
         ) -> list[str]:
    schedule = row.schedule
    zone_text = f" ({schedule['timezone']})" if schedule is not None else ""
    heading = row.name + zone_text
    summary = heading + (": not among the objects given" if schedule is None else
                         (f": {schedule['problem']}" if schedule["problem"] else ""))
    data = (f' data-kind="{escape(schedule["kind"])}" data-name="{escape(schedule["name"])}" '
            f'data-namespace="{escape(schedule["namespace"])}"' if schedule is not None else "")
    parts = [f'<g class="row"{data}><title>{escape(summary)}</title>',
             f'<text x="{8 + row.depth * INDENT}" y="{top + 18}" fill="{INK}">'
             f'{escape(_label(("└ " if row.depth else "") + row.name))}</text>',
             f'<text x="{8 + row.depth * INDENT}" y="{top + 31}" fill="#57606a" font-size="10">'
             f'{escape(_label(zone_text.strip(" ()") or "not among the objects given"))}</text>']
    bar_top, bar_bottom = top + BAR[0], top + BAR[1]
    if schedule is None:
        spans: list[tuple[dt.datetime, dt.datetime, str]] = [(*window(report), "unresolved")]
    else:
        spans = list(intervals(schedule, end))
    for begin, finish, state in spans:
        left, right = x_of(report, begin), x_of(report, finish)
        parts.append(f'<rect class="state" data-state="{state}" data-start="{_z(begin)}" '
                     f'data-end="{_z(finish)}" x="{_f(left)}" y="{bar_top}" '
                     f'width="{_f(right - left)}" height="{bar_bottom - bar_top}" '
                     f'fill="{_fill(state, prefix)}"><title>{escape(state)} {_z(begin)} to '
                     f'{_z(finish)}</title></rect>')
    for mark in (schedule or {}).get("marks", ()):
        begin, finish = _instant(mark["start"]), _instant(mark["end"])
        left, right = x_of(report, begin), x_of(report, finish)
        parts.append(f'<rect class="mark" data-kind="{mark["kind"]}" data-start="{mark["start"]}" '
                     f'data-end="{mark["end"]}" x="{_f(left)}" y="{top + MARKS[0]}" '
                     f'width="{_f(max(right - left, 1.0))}" height="{MARKS[1] - MARKS[0]}" '
                     f'fill="{COLOURS[mark["kind"]]}"><title>{escape(mark["label"])} '
                     f'({mark["start"]} to {mark["end"]})</title></rect>')
    parts.append("</g>")
    return parts


def _z(instant: dt.datetime) -> str:
    return instant.astimezone(_UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _legend(report: Mapping[str, Any], top: int, prefix: str) -> list[str]:
    used = sorted({m["kind"] for s in report["schedules"] for m in s["marks"]},
                  key=list(MARK_KINDS).index)
    entries: Sequence[tuple[str, str]] = [("active", "active"), ("inactive", "inactive"),
                                          ("unresolved", "unresolved")]
    entries = [*entries, *((kind, f"{kind}: {MARK_KINDS[kind]}") for kind in used)]
    parts = [f'<g class="legend"><title>Legend</title>']
    x = 8
    for key, text in entries:
        parts.append(f'<rect x="{x}" y="{top}" width="18" height="12" fill="{_fill(key, prefix)}" '
                     f'stroke="{GRID}"/>')
        parts.append(f'<text x="{x + 24}" y="{top + 11}" fill="{INK}">{escape(text)}</text>')
        x += 40 + 6 * len(text)
    parts.append("</g>")
    return parts


def html(report: Mapping[str, Any], zone_name: str, table_text: str) -> str:
    """A self-contained page: the picture, then the same report as the text table."""
    start, end = window(report)
    zone = ZoneInfo(zone_name)
    title = f"fivespot schedule preview: {_local(start, zone)} to {_local(end, zone)}"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title>"
            "<style>body{font-family:sans-serif;margin:16px;color:#1f2328}"
            "svg{max-width:100%;height:auto}pre{font-size:12px;overflow-x:auto}</style>"
            f"</head><body><h1>{escape(title)}</h1>\n{svg(report, zone_name)}\n"
            "<h2>The same, as text</h2>\n"
            f"<pre>{escape(table_text)}</pre>\n</body></html>\n")
