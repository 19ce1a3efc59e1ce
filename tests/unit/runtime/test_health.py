"""The probe and metrics servers sleep while nobody asks (decision 0040): no wake-up of an idle
process between two scrapes, an answer when one comes, and a stop that does not wait for one."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest
from prometheus_client import CollectorRegistry

from fivespot.runtime.health import HealthServer
from fivespot.webhook import metrics as webhook_metrics

Serving = tuple[int, threading.Thread, Callable[[], None]]
"""The port, the serving thread, and how to stop it."""


def _switches(thread: threading.Thread) -> int:
    """How often the kernel has switched the thread out: each wake-up costs at least one."""
    with open(f"/proc/self/task/{thread.native_id}/status") as status:
        return sum(int(line.split()[1]) for line in status if "ctxt_switches" in line)


@contextmanager
def _health() -> Iterator[Serving]:
    server = HealthServer(0, host="127.0.0.1")
    server.add_liveness("always", lambda: True)
    server.start()
    assert server._thread is not None
    yield server.port, server._thread, server.stop


@contextmanager
def _webhook_metrics() -> Iterator[Serving]:
    before = set(threading.enumerate())
    httpd = webhook_metrics.serve(CollectorRegistry(), 0, "127.0.0.1", shared=False)
    [thread] = [t for t in threading.enumerate() if t not in before and t.name == "metrics"]

    def stop() -> None:
        httpd.shutdown()
        httpd.server_close()

    yield int(httpd.server_address[1]), thread, stop


@pytest.mark.parametrize("serving", [_health, _webhook_metrics], ids=["health", "webhook-metrics"])
def test_an_idle_server_does_not_wake_answers_a_scrape_and_stops_at_once_and_twice(
    serving: Callable[[], AbstractContextManager[Serving]],
) -> None:
    with serving() as (port, thread, stop):
        path = "/healthz" if serving is _health else "/metrics"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            assert answer.status == 200
        time.sleep(0.2)  # the answered request's own switches are behind us
        before = _switches(thread)
        time.sleep(1.6)
        assert _switches(thread) - before <= 1, "polled: the standard loop wakes twice a second"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            assert answer.status == 200
        started = time.monotonic()
        stop()
        thread.join(2)
        assert not thread.is_alive()
        assert time.monotonic() - started < 1.0
        stop()  # a second stop finds the loop ended and the wake-up pipe closed: nothing to do
