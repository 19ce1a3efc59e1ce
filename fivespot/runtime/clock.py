"""Time as an injected dependency, so every timing decision in the runtime can be tested.

Two clocks, never mixed: `monotonic()` for durations and deadlines (leases, backoff, stall
detection) because it cannot jump when NTP steps the wall clock, and `now()` (aware UTC) for the
timestamps written into objects, which people and other processes read.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Protocol


class Clock(Protocol):
    """What the runtime needs to know about time."""

    def monotonic(self) -> float:
        """Seconds on a clock that only moves forward (deadlines, intervals)."""

    def now(self) -> datetime:
        """The wall-clock time, timezone-aware UTC (timestamps written to objects)."""


class SystemClock:
    """The real clocks of this process."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(timezone.utc)


SYSTEM_CLOCK: Clock = SystemClock()
