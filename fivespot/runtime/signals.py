"""Graceful shutdown: SIGTERM (the kubelet's stop) and SIGINT set one event the main thread waits
on, so the process stops acting, releases its leases and exits instead of being cut mid-write."""

from __future__ import annotations

import signal
import threading
from types import FrameType


def stop_event_on_signals(event: threading.Event | None = None) -> threading.Event:
    """An event set by SIGTERM or SIGINT (install from the main thread)."""
    stop = event or threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop
