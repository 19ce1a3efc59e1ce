"""The week's picture as a real browser draws it, against what the text preview says.

`fivespot schedule preview` prints a table; `-o svg` draws the same report. Debian's headless
Chromium renders the SVG: the DOM (each bar's and mark's rendered box) and the pixels (the colour
on either side of every transition, inside every mark) must put each flip and each mark at the
instant the *table* prints for it, in the row of its schedule. The docs pages that embed a
picture (drawn at build time by the `fivespot-schedule-picture` directive) must hold the same
picture and show it.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import re
import subprocess
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from fivespot.cli import picture
from fivespot.cli.main import main
from tests.docs.conftest import ROOT, chromium

EXAMPLE = ROOT / "examples" / "agent-sandbox"
THANKSGIVING = [str(EXAMPLE / "tenant"), "--config", str(EXAMPLE / "config"),
                "--from", "2026-11-23T00:00:00-05:00", "--until", "2026-11-30T00:00:00-05:00",
                "--timezone", "America/New_York"]
OVERRIDE = [str(ROOT / "examples" / "schedule-override"), "--from", "2026-11-24T18:00:00Z",
            "--until", "2026-11-26T18:00:00Z", "--timezone", "Europe/London"]
SLACK = 3
"""Pixels either side of an edge (antialiasing)."""


def _preview(*args: str) -> str:
    out = StringIO()
    with redirect_stdout(out):
        assert main(["schedule", "preview", *args]) == 0
    return out.getvalue()


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def _close(pixel: object, colour: str) -> bool:
    """Whether an RGB pixel (PIL's getpixel, getcolors) is `colour`, give or take blending."""
    assert isinstance(pixel, tuple), pixel
    return all(abs(int(a) - b) <= 6 for a, b in zip(pixel[:3], _rgb(colour)))


def _instant(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass
class Printed:
    """One schedule as the text table prints it."""

    title: str
    flips: list[tuple[dt.datetime, str]] = field(default_factory=list)
    marks: list[tuple[dt.datetime, dt.datetime, str]] = field(default_factory=list)


_HEADING = re.compile(r"^(\w+) (\S+/\S+) \(")
_ROW = re.compile(r"^  (?:from|    ) \S+ \S+ \S+ (\S+Z)  (active|inactive|unresolved)\b")
_MARK = re.compile(r"^  mark (\S+ \S+ \S+) to (\S+ \S+ \S+)  (.+)$")
_LABELS = {"holiday ": "holiday", "early close ": "early-close", "late open ": "late-open",
           "special session ": "special-session", "override: ": "override"}
"""How the table's mark labels begin, by mark kind (`fivespot/controllers/spotschedules/capital_markets.py`
`marks`, `fivespot/controllers/spotschedules/timeline.py`)."""


def _local(text: str) -> dt.datetime:
    day, clock, offset = text.split()
    return dt.datetime.fromisoformat(f"{day}T{clock}{offset}")


def read_table(text: str) -> dict[str, Printed]:
    """The table's schedules by `Kind ns/name`: each state from `from` on, and each mark."""
    found: dict[str, Printed] = {}
    current: Printed | None = None
    for line in text.splitlines()[1:]:
        heading = _HEADING.match(line)
        if heading:
            current = found.setdefault(f"{heading[1]} {heading[2]}", Printed(line))
            continue
        assert current is not None, line
        row, mark = _ROW.match(line), _MARK.match(line)
        if row:
            current.flips.append((_instant(row[1]), row[2]))
        elif mark:
            kind = next(v for k, v in _LABELS.items() if mark[3].startswith(k))
            current.marks.append((_local(mark[1]), _local(mark[2]), kind))
    return found


def _render(svg: str, tmp_path: Path) -> tuple[Image.Image, list[dict[str, Any]]]:
    """Chromium's screenshot of the SVG at 1:1, and the rendered box of each bar and mark."""
    height = int(re.search(r'height="(\d+)"', svg)[1])  # type: ignore[index]
    page = tmp_path / "picture.html"
    page.write_text(
        "<!DOCTYPE html><html><body style=\"margin:0\">" + svg + "<pre id=\"boxes\"></pre><script>"
        "document.getElementById('boxes').textContent = JSON.stringify(Array.from("
        "document.querySelectorAll('rect.state, rect.mark'), r => { const b = "
        "r.getBoundingClientRect(); const g = r.closest('g.row'); return {cls: r.getAttribute("
        "'class'), kind: r.dataset.kind || r.dataset.state, start: r.dataset.start, end: "
        "r.dataset.end, name: g.dataset.namespace + '/' + g.dataset.name, gkind: g.dataset.kind, "
        "left: b.left, right: b.right, top: b.top, bottom: b.bottom}; }));</script></body></html>")
    common = [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
              "--disable-background-networking", "--hide-scrollbars", "--force-device-scale-factor=1",
              f"--window-size={picture.WIDTH},{height}"]
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    boxes = json.loads(html.unescape(re.search(r'<pre id="boxes">(.*?)</pre>', dom, re.S)[1]))  # type: ignore[index]
    shot = tmp_path / "shot.png"
    subprocess.run([*common, f"--screenshot={shot}", page.as_uri()], capture_output=True,
                   timeout=120, check=True)
    return Image.open(shot).convert("RGB"), boxes


@pytest.mark.parametrize("args", [THANKSGIVING, OVERRIDE], ids=["thanksgiving", "override"])
def test_chromium_draws_each_flip_and_mark_where_the_text_preview_puts_it(
        args: list[str], tmp_path: Path) -> None:
    printed = read_table(_preview(*args))
    report = json.loads(_preview(*args, "-o", "json"))
    image, boxes = _render(_preview(*args, "-o", "svg"), tmp_path)
    assert image.size[0] == picture.WIDTH
    rows = picture.rows(report)
    assert sorted(r.name for r in rows) == sorted(printed)
    end = picture.window(report)[1]
    checked_flips = checked_marks = 0
    for index, row in enumerate(rows):
        table = printed[row.name]
        top = picture.row_top(index)
        bar_y = top + (picture.BAR[0] + picture.BAR[1]) // 2
        mark_y = top + (picture.MARKS[0] + picture.MARKS[1]) // 2
        mine = [b for b in boxes if f"{b['gkind']} {b['name']}" == row.name]
        # The DOM: one bar per state the table prints, starting where its instant is (a flip at
        # the window's very end starts nothing inside it).
        flips = [(when, state) for when, state in table.flips if when < end]
        bars = [b for b in mine if b["cls"] == "state"]
        assert [(_instant(b["start"]), b["kind"]) for b in bars] == flips, row.name
        for bar in bars:
            assert abs(bar["left"] - picture.x_of(report, _instant(bar["start"]))) <= 1
            assert top + picture.BAR[0] - 1 <= bar["top"] and bar["bottom"] <= top + picture.BAR[1] + 1
        # The pixels: the old state's colour just before each flip, the new one's just after.
        for (_, before), (when, after) in zip(flips, flips[1:]):
            x = round(picture.x_of(report, when))
            if "unresolved" in (before, after):
                continue  # hatched: no single colour
            left, right = image.getpixel((x - SLACK, bar_y)), image.getpixel((x + SLACK, bar_y))
            assert _close(left, picture.COLOURS[before]), (row.name, when, before, left)
            assert _close(right, picture.COLOURS[after]), (row.name, when, after, right)
            checked_flips += 1
        marks = sorted((_instant(b["start"]), _instant(b["end"]), b["kind"]) for b in mine
                       if b["cls"] == "mark")
        assert marks == sorted(table.marks), row.name
        for start, end, kind in table.marks:
            middle = round((picture.x_of(report, start) + picture.x_of(report, end)) / 2)
            assert _close(image.getpixel((middle, mark_y)), picture.COLOURS[kind]), (row.name, kind)
            edge = round(picture.x_of(report, start)) - SLACK
            if edge > picture.LABEL_WIDTH:
                assert _close(image.getpixel((edge, mark_y)), "#ffffff"), (row.name, kind, "starts early")
            checked_marks += 1
    assert checked_flips >= 6 and checked_marks >= 1  # not vacuous


@pytest.mark.parametrize(("page", "args", "marks"), [
    ("explanation/providers.html", THANKSGIVING, {"holiday", "early-close"}),
    ("how-to/override.html", OVERRIDE, {"override"}),
])
def test_the_schedules_docs_pages_show_the_picture_the_command_draws(
        site: Path, page: str, args: list[str], marks: set[str], tmp_path: Path) -> None:
    built = (site / page).read_text()
    found = re.findall(r'<figure class="fivespot-schedule-picture">(<svg .*?</svg>)', built, re.S)
    assert len(found) == 1, page
    embedded = re.sub(r'fivespot-week-\d+', "fivespot-week", found[0])
    assert embedded + "\n" == _preview(*args, "-o", "svg"), f"{page}: not the command's picture"
    assert {m for m in re.findall(r'class="mark" data-kind="([a-z-]+)"', embedded)} == marks
    # What a reader sees: the page, scrolled nowhere, rendered tall enough to hold the picture.
    shot = tmp_path / "page.png"
    subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-background-networking", "--hide-scrollbars",
                    "--force-device-scale-factor=1", "--window-size=1280,9000",
                    f"--screenshot={shot}", (site / page).as_uri()],
                   capture_output=True, timeout=120, check=True)
    image = Image.open(shot).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20) or []
    counted = {name: sum(int(n) for n, rgb in colours if _close(rgb, picture.COLOURS[name]))
               for name in ("active", *marks)}
    assert counted["active"] > 2000, f"{page}: no active bars drawn ({counted})"
    for kind in marks:
        assert counted[kind] > 20, f"{page}: no {kind} mark drawn ({counted})"
