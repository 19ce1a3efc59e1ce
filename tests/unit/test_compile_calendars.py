"""ScheduleProvider `calendars:` compile into reviewed CapitalMarketsSchedule objects.

The error cases with exact `FILE:LINE:COL` text live in `testdata/invalid-calendar-*` (run by
test_compile_invalid); these tests cover what a valid calendar compiles into.
"""

from __future__ import annotations

import datetime as dt
import sys
import textwrap
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from fivespot.api.kinds.providers import CapitalMarketsScheduleSpec
from fivespot.compiler import calendars as exchange
from fivespot.compiler.diagnostics import CompileError
from fivespot.compiler.emit.base import LAYERS, SCHEDULES, SYNC_WAVES, WORKLOADS
from fivespot.compiler.emit.schedules import EXCHANGE_ANNOTATION, YEARS_ANNOTATION
from fivespot.compiler.pipeline import compile_repo
from fivespot.controllers.spotschedules import capital_markets

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent-sandbox" / "config"
NEW_YORK = ZoneInfo("America/New_York")

PLATFORM = """\
apiVersion: config.5spot.finos.org/v1alpha1
kind: Platform
metadata:
  name: test
spec:
  image: example.com/fivespot:test
"""


def _repo(tmp_path: Path, calendars: str) -> Path:
    (tmp_path / "platform.yaml").write_text(PLATFORM)
    (tmp_path / "providers.yaml").write_text(
        "apiVersion: config.5spot.finos.org/v1alpha1\n"
        "kind: ScheduleProvider\n"
        "metadata:\n  name: builtin\n"
        "spec:\n  builtin: [CapitalMarketsSchedule]\n  calendars:\n"
        + textwrap.indent(textwrap.dedent(calendars), "    ")
    )
    return tmp_path


def _schedules(config: Path) -> dict[str, dict[str, Any]]:
    return {a.path: a.obj for a in compile_repo(config).artifacts
            if a.kind == "CapitalMarketsSchedule"}


def test_the_example_compiles_the_nyse_calendar_into_namespace_agents() -> None:
    schedules = _schedules(EXAMPLE)
    assert list(schedules) == ["schedules/agents/nyse.capitalmarketsschedule.yaml"]
    nyse = schedules["schedules/agents/nyse.capitalmarketsschedule.yaml"]
    assert nyse["apiVersion"] == "spotschedules.5spot.finos.org/v1alpha1"
    assert nyse["metadata"]["namespace"] == "agents"
    assert nyse["metadata"]["annotations"][EXCHANGE_ANNOTATION] == "XNYS"
    assert nyse["metadata"]["annotations"][YEARS_ANNOTATION] == "2026-2027"
    spec = nyse["spec"]
    assert spec["timezone"] == "America/New_York"
    assert spec["sessions"] == [{"days": "mon-fri", "open": "09:30", "close": "16:00"}]
    assert {"2026-11-26", "2026-12-25", "2027-07-05"} <= set(spec["holidays"])
    assert {"date": "2026-11-27", "close": "13:00"} in spec["earlyCloses"]
    assert spec == exchange.resolve_exchange({"exchange": "XNYS"}, 2026, 2027)


def test_the_compiled_calendar_opens_at_0930_and_closes_early_the_day_after_thanksgiving() -> None:
    nyse = _schedules(EXAMPLE)["schedules/agents/nyse.capitalmarketsschedule.yaml"]
    spec = CapitalMarketsScheduleSpec.model_validate(nyse["spec"])

    def at(day: int, hour: int, minute: int) -> dt.datetime:
        return dt.datetime(2026, 11, day, hour, minute, tzinfo=NEW_YORK)

    assert not capital_markets.is_active(spec, at(26, 12, 0))  # Thanksgiving
    assert not capital_markets.is_active(spec, at(27, 9, 29))
    assert capital_markets.is_active(spec, at(27, 9, 30))
    assert capital_markets.is_active(spec, at(27, 12, 59))
    assert not capital_markets.is_active(spec, at(27, 13, 0))
    assert capital_markets.next_transition(spec, at(27, 10, 0)) == at(27, 13, 0)


def test_schedules_are_their_own_layer_synced_after_the_workloads_and_the_webhook() -> None:
    assert LAYERS.index(SCHEDULES) > LAYERS.index("webhook") > LAYERS.index(WORKLOADS)
    assert int(SYNC_WAVES[SCHEDULES]) > int(SYNC_WAVES[WORKLOADS])
    files = compile_repo(EXAMPLE).files
    assert files["waves/kustomization.yaml"].endswith(b"- ../schedules\n")
    assert b"agents/nyse.capitalmarketsschedule.yaml" in files["schedules/kustomization.yaml"]
    assert b"name: fivespot-webhook\n" in files["flux/layers/fivespot-schedules.yaml"]


def test_a_calendar_gives_one_schedule_per_namespace_and_overrides_layer_on_the_exchange(
    tmp_path: Path,
) -> None:
    config = _repo(tmp_path, """\
        - name: nyse-open
          namespaces: [research, desk]
          exchange: XNYS
          years: {first: 2026, last: 2026}
          sessions: [{days: mon-fri, open: "09:30", close: "10:30"}]
          holidays: ["2026-03-02"]
          earlyCloses: [{date: "2026-11-27", closeHour: 10}, {date: "2026-12-31", close: "12:00"}]
        """)
    schedules = _schedules(config)
    assert sorted(schedules) == ["schedules/desk/nyse-open.capitalmarketsschedule.yaml",
                                 "schedules/research/nyse-open.capitalmarketsschedule.yaml"]
    desk, research = (schedules[path]["spec"] for path in sorted(schedules))
    assert desk == research
    assert desk["sessions"] == [{"days": "mon-fri", "open": "09:30", "close": "10:30"}]
    assert "2026-03-02" in desk["holidays"] and "2026-12-25" in desk["holidays"]
    by_date = {entry["date"]: entry for entry in desk["earlyCloses"]}
    assert by_date["2026-11-27"] == {"date": "2026-11-27", "closeHour": 10}
    assert by_date["2026-12-31"] == {"date": "2026-12-31", "close": "12:00"}
    assert by_date["2026-12-24"] == {"date": "2026-12-24", "close": "13:00"}


def test_without_the_calendars_extra_the_declaring_line_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _repo(tmp_path, """\
        - name: nyse
          namespaces: [desk]
          exchange: XNYS
          years: {first: 2026, last: 2026}
        """)
    monkeypatch.setitem(sys.modules, "exchange_calendars", None)  # makes the import fail
    with pytest.raises(CompileError) as raised:
        compile_repo(config)
    assert [str(d) for d in raised.value.diagnostics] == [
        "providers.yaml:10:7: spec.calendars[0].exchange: expanding an exchange calendar needs "
        "the exchange_calendars library: pip install fivespot[calendars]"
    ]


def test_a_repo_without_calendars_never_imports_the_calendars_library(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    no_calendars = Path(__file__).parent / "testdata" / "valid-no-consumers"
    monkeypatch.setitem(sys.modules, "exchange_calendars", None)
    compiled = compile_repo(no_calendars)
    assert not any(a.layer == SCHEDULES for a in compiled.artifacts)
    assert "schedules/kustomization.yaml" not in compiled.files


def test_a_calendar_the_library_fails_to_build_is_a_diagnostic_on_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As exchange_calendars did under pandas 3 for ASEX, XBEL, XBSE and XCYS."""
    import exchange_calendars

    def broken(name: str, **kwargs: Any) -> Any:
        raise NotImplementedError("implemented by subclasses")

    config = _repo(tmp_path, """\
        - name: athens
          namespaces: [desk]
          exchange: ASEX
          years: {first: 2026, last: 2026}
        """)
    monkeypatch.setattr(exchange_calendars, "get_calendar", broken)
    exchange._expand.cache_clear()
    try:
        with pytest.raises(CompileError) as raised:
            compile_repo(config)
    finally:
        exchange._expand.cache_clear()
    [diagnostic] = [str(d) for d in raised.value.diagnostics]
    assert diagnostic.startswith("providers.yaml:10:7: spec.calendars[0].exchange: exchange_calendars ")
    assert diagnostic.endswith(
        "cannot build the ASEX calendar for 2026..2026: NotImplementedError: implemented by subclasses")
