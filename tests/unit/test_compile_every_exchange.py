"""Every exchange code exchange_calendars lists, for the current and the next year, compiles into a
CapitalMarketsSchedule or is refused with a diagnostic on the line that declared it (exit 2),
never a traceback; and none is refused because the library could not build it.

docs/reference/calendars.md ("Every exchange compiles", its table) records the refusals of 2026-2027 and
why.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
import yaml

from fivespot.cli.main import main

exchange_calendars = pytest.importorskip("exchange_calendars")

YEAR = dt.date.today().year
CODES = sorted(exchange_calendars.get_calendar_names(include_aliases=True))
DIAGNOSTIC = re.compile(r"^providers\.yaml:(\d+):(\d+): spec\.calendars\[(\d+)\]\.(exchange|years): (.+)$")
PLATFORM = """\
apiVersion: config.5spot.finos.org/v1alpha1
kind: Platform
metadata: {name: markets}
spec: {image: example.com/fivespot:test}
"""
PER_PROVIDER = 50
"""Calendars per ScheduleProvider document (a document holds at most 64)."""


def _name(code: str) -> str:
    return "cal-" + re.sub(r"[^a-z0-9]+", "-", code.lower())


def _repo(folder: Path, codes: list[str]) -> dict[str, range]:
    """Write a repo declaring one calendar per code; the lines each code's declaration spans."""
    lines = PLATFORM.splitlines()
    spans = {}
    for index, code in enumerate(codes):
        if index % PER_PROVIDER == 0:
            lines += ["---", "apiVersion: config.5spot.finos.org/v1alpha1",
                      "kind: ScheduleProvider", f"metadata: {{name: markets-{index}}}", "spec:",
                      "  builtin: [CapitalMarketsSchedule]", "  calendars:"]
        start = len(lines) + 1
        lines += [f"    - name: {_name(code)}", "      namespaces: [markets]",
                  f"      exchange: {yaml.safe_dump(code).splitlines()[0]}",
                  f"      years: {{first: {YEAR}, last: {YEAR + 1}}}"]
        spans[code] = range(start, len(lines) + 1)
    folder.mkdir()
    (folder / "providers.yaml").write_text("\n".join(lines) + "\n")
    return spans


def test_every_listed_exchange_compiles_or_is_refused_on_its_declaring_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert len(CODES) > 50
    spans = _repo(tmp_path / "all", CODES)
    code = main(["compile", str(tmp_path / "all"), "--out", str(tmp_path / "out-all")])
    err = capsys.readouterr().err
    assert code in (0, 2), err
    assert "Traceback" not in err
    refused: dict[str, str] = {}
    for line in err.splitlines()[:-1] if code == 2 else []:
        match = DIAGNOSTIC.match(line)
        assert match, line
        declared = [c for c, span in spans.items() if int(match[1]) in span]
        assert len(declared) == 1 and int(match[3]) == CODES.index(declared[0]) % PER_PROVIDER, line
        refused[declared[0]] = match[5]
    if code == 2:
        assert err.splitlines()[-1] == f"{len(refused)} error{'s' if len(refused) != 1 else ''}; nothing was written"
        assert not (tmp_path / "out-all").exists()
    unbuildable = {c: m for c, m in refused.items() if "cannot build" in m}
    assert not unbuildable, "the pinned pandas must build every calendar"

    accepted = [c for c in CODES if c not in refused]
    assert len(accepted) > len(CODES) // 2, refused
    _repo(tmp_path / "accepted", accepted)
    out = tmp_path / "out"
    assert main(["compile", str(tmp_path / "accepted"), "--out", str(out)]) == 0, capsys.readouterr().err
    for code_ in accepted:
        written = yaml.safe_load(
            (out / "schedules" / "markets" / f"{_name(code_)}.capitalmarketsschedule.yaml").read_text())
        assert written["metadata"]["annotations"]["spotschedules.5spot.finos.org/exchange"] == code_
        assert written["spec"]["sessions"], code_
