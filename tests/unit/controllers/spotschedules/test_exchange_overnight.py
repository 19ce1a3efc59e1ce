"""Overnight, longer-than-regular and off-weekday sessions: the exchanges the CapitalMarketsSchedule
vocabulary could not say before (CMES, IEPA and us_futures trade from the evening before; XSGO
trades longer in the southern summer; XTAE traded one last Sunday) compile, and the compiled
schedule's activity and next transition equal exchange_calendars' sessions at every open, close
and break edge of 2026-2027."""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from fivespot.api.kinds.providers import CapitalMarketsScheduleSpec
from fivespot.compiler.calendars import ExchangeSession, expand_exchange
from fivespot.controllers.spotschedules import capital_markets as cm

pytestmark = pytest.mark.unit

exchange_calendars = pytest.importorskip("exchange_calendars")

SECOND = dt.timedelta(seconds=1)


def _library_calendar(code: str) -> Any:
    """The installed exchange_calendars' calendar of 2026-2027 for `code`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return exchange_calendars.get_calendar(code, start="2026-01-01", end="2027-12-31")


def _library_intervals(code: str) -> list[tuple[dt.datetime, dt.datetime]]:
    """exchange_calendars' open stretches of 2026-2027 in UTC, breaks cut out, touching merged."""
    calendar = _library_calendar(code)
    stretches: list[tuple[dt.datetime, dt.datetime]] = []
    for _, row in calendar.schedule.iterrows():
        parts = [(row["open"], row["close"])]
        if not (row["break_start"] is None or str(row["break_start"]) == "NaT"):
            parts = [(row["open"], row["break_start"]), (row["break_end"], row["close"])]
        for start, end in parts:
            start, end = start.to_pydatetime(), end.to_pydatetime()
            if stretches and start <= stretches[-1][1]:
                stretches[-1] = (stretches[-1][0], max(end, stretches[-1][1]))
            else:
                stretches.append((start, end))
    return stretches


def _edges(stretches: list[tuple[dt.datetime, dt.datetime]]) -> Iterator[tuple[dt.datetime, bool]]:
    for start, end in stretches:
        yield start, True
        yield end, False


@pytest.mark.parametrize("code", ["CMES", "IEPA", "us_futures", "XSGO", "XTAE"])
def test_the_compiled_calendar_flips_exactly_at_every_library_edge_of_2026_and_2027(code: str) -> None:
    spec = CapitalMarketsScheduleSpec.model_validate(expand_exchange(code, 2026, 2027).spec_fields())
    edges = list(_edges(_library_intervals(code)))
    assert len(edges) > 100
    for index, (edge, opens) in enumerate(edges):
        assert cm.is_active(spec, edge) is opens, (code, edge)
        assert cm.is_active(spec, edge - SECOND) is not opens, (code, edge)
        assert cm.next_transition(spec, edge - SECOND) == edge, (code, edge)
        if index + 1 < len(edges):
            assert cm.next_transition(spec, edge) == edges[index + 1][0], (code, edge)


def _library_close(code: str) -> str:
    """The exchange's regular close in its own zone, as the installed exchange_calendars has it."""
    [(_, close)] = _library_calendar(code).close_times
    return str(close.strftime("%H:%M"))


def test_cme_globex_opens_on_the_evening_before_and_closes_when_the_library_says() -> None:
    # exchange_calendars up to 4.13.2 closes CMES at 17:00, one session from Sunday evening to
    # Friday evening; 4.13.3 closes it at 16:00, the daily maintenance halt before the 17:00 open.
    close = _library_close("CMES")
    cme = expand_exchange("CMES", 2026, 2027)
    assert cme.sessions == (ExchangeSession("mon-fri", "17:00", close, opens_previous_day=True),)
    spec = CapitalMarketsScheduleSpec.model_validate(cme.spec_fields())
    chicago = spec.zone
    sunday_open = dt.datetime(2026, 3, 1, 17, tzinfo=chicago)
    assert not cm.is_active(spec, sunday_open - SECOND) and cm.is_active(spec, sunday_open)
    # Sessions that touch (17:00 to 17:00) run through to Friday's close; a halt ends Monday's.
    hour, minute = map(int, close.split(":"))
    first_close = dt.datetime(2026, 3, 6 if close == "17:00" else 2, hour, minute, tzinfo=chicago)
    assert cm.next_transition(spec, sunday_open) == first_close


def test_santiagos_longer_summer_days_are_special_sessions() -> None:
    xsgo = expand_exchange("XSGO", 2026, 2027)
    assert xsgo.sessions == (ExchangeSession("mon-fri", "09:30", "16:00"),)
    assert ("2026-01-02", (("09:30", "17:00", False),)) in xsgo.special_sessions
    spec = CapitalMarketsScheduleSpec.model_validate(xsgo.spec_fields())
    assert cm.is_active(spec, dt.datetime(2026, 1, 2, 16, 30, tzinfo=spec.zone))
    assert not cm.is_active(spec, dt.datetime(2026, 6, 2, 16, 30, tzinfo=spec.zone))
