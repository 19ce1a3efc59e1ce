"""Marks on a schedule's timeline: what a person should see besides on and off.

A holiday, an early close, an override: each is an interval, a kind and a label (`Mark`), nothing
more, so the text preview lists them and the picture draws them without knowing where they come
from. A provider kind with something to mark has one function `marks(spec, start, end)`
registered in `fivespot.controllers.spotschedules.timeline.MARK_SOURCES`; an override is marked for every
built-in kind by the timeline itself. A new source of marks is one more function and one
registry entry, and the picture draws it (a TimeBasedSpotSchedule's public holidays and other
dated closures came so).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Final, Literal

MarkKind = Literal["holiday", "early-close", "late-open", "special-session", "override"]

MARK_KINDS: Final[dict[MarkKind, str]] = {
    "holiday": "closed all day",
    "early-close": "closes early",
    "late-open": "opens late",
    "special-session": "trades its own sessions",
    "override": "spec.override holds it",
}
"""Every kind of mark, with what it means (the picture's legend)."""


@dataclass(frozen=True, order=True)
class Mark:
    """An interval [start, end) of a schedule's timeline worth pointing at."""

    start: dt.datetime
    end: dt.datetime
    kind: MarkKind
    label: str

    def overlaps(self, start: dt.datetime, end: dt.datetime) -> bool:
        """Whether the mark meets the window [start, end] (a mark holding at `start` does)."""
        return self.start <= end and self.end > start
