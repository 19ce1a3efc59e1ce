"""Kubernetes Events (`events.k8s.io/v1`), recorded off the reconcile path, and logged.

An Event is where a person looks first (`kubectl describe`, `kubectl events`), and every one is a
POST: at a market open a reconcile that waited for its Events would hold its worker for a round
trip each. So `record` only queues; one thread sends, in order, and a full queue drops with a
warning rather than blocking a reconcile. Every Event is also a log line (warning for a Warning
Event), so the log and `kubectl describe` tell the same story — what an alert's runbook reads.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from fivespot.runtime import kube
from fivespot.runtime.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger("fivespot.events")

QUEUE_SIZE: Final = 1000
EventType = Literal["Normal", "Warning"]


def reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An Event's `regarding`: the object as the controller read it."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    found = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
             "name": meta.get("name"), "namespace": meta.get("namespace"), "uid": meta.get("uid")}
    if meta.get("resourceVersion") is not None:
        found["resourceVersion"] = meta.get("resourceVersion")
    return found


@dataclass(frozen=True)
class _Pending:
    regarding: Mapping[str, Any]
    type: EventType
    reason: str
    note: str


class EventRecorder:
    """Queues Events and sends them from one thread, as `reporting_controller` / `instance`."""

    def __init__(self, api: kube.ApiClient, reporting_controller: str, instance: str, *,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.api = api
        self.reporting_controller = reporting_controller
        self.instance = instance[:128]
        self.clock = clock
        self._queue: queue.Queue[_Pending | None] = queue.Queue(maxsize=QUEUE_SIZE)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="events", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Send what is queued (within `timeout`), then stop."""
        self._stop.set()
        try:
            self._queue.put_nowait(None)  # wakes the sender; when full, it drains and sees _stop
        except queue.Full:
            pass
        if self._thread.is_alive():
            self._thread.join(timeout)

    def record(self, regarding: Mapping[str, Any], type_: EventType, reason: str,
               note: str) -> None:
        """Queue one Event about `regarding` (`reference(obj)`), and log it."""
        level = logging.WARNING if type_ == "Warning" else logging.INFO
        log.log(level, "event", extra={
            "key": f"{regarding.get('namespace')}/{regarding.get('name')}",
            "kind": regarding.get("kind"), "reason": reason, "note": note[:300]})
        try:
            self._queue.put_nowait(_Pending(regarding, type_, reason, note))
        except queue.Full:
            log.warning("event queue full; dropping an event", extra={"reason": reason})

    def _run(self) -> None:
        while not (self._stop.is_set() and self._queue.empty()):
            pending = self._queue.get()  # idle costs nothing: `stop` wakes it with None
            if pending is not None:
                self._send(pending)

    def _send(self, pending: _Pending) -> None:
        regarding = pending.regarding
        namespace = str(regarding.get("namespace") or "default")
        body = {
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"generateName": f"{regarding.get('name')}-", "namespace": namespace},
            "eventTime": self.clock.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "reportingController": self.reporting_controller,
            "reportingInstance": self.instance,
            "action": "Reconcile", "reason": pending.reason[:128], "note": pending.note[:1024],
            "type": pending.type,
            "regarding": {k: v for k, v in regarding.items() if v is not None},
        }
        path = kube.resource_path("events.k8s.io", "v1", "events", namespace)
        try:
            kube.request(self.api, "POST", path, body=body, timeout=(2.0, 5.0))
        except kube.ApiError as error:
            log.info("could not record an event", extra={"reason": pending.reason,
                                                         "error": str(error)[:200]})
