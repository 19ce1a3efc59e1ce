"""One coordination.k8s.io/v1 Lease per partition, and a leader per partition.

The decision is the pure function `decide(view, me, now, held, timing, renewed_at)`; the
`LeaderElector` only reads and writes Leases and keeps the clock. The rules that make it safe:

- Time is local and monotonic. A candidate measures a holder's lease from the moment *it*
  observed the holder's last change (resourceVersion), never from the `renewTime` written by
  another machine's clock (client-go's rule; clock skew cannot shorten a lease).
- A leader counts its own lease from the moment it *sent* its last successful renewal, and stops
  acting once `renew_deadline_s` has passed, which is shorter than `lease_duration_s`. The
  candidate observed that renewal no earlier than it was sent and waits the whole duration, so
  the old leader has stopped before anyone else can start: no two replicas ever act for one
  partition (as long as one write takes less than `lease_duration_s - renew_deadline_s`).
- Every write is conditional on the resourceVersion read (optimistic concurrency): of two
  candidates only one update lands; the other sees 409 and reads again.
- Leadership spreads: a replica that already holds k leases waits `k * spread_s` longer before
  taking a free or expired one, so a replica holding none wins it.
- Graceful shutdown stops acting first, then releases each held lease (holder cleared), so a
  peer takes over after `spread` instead of a whole lease duration.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from kubernetes import client

from api.identities import lease_name
from runtime import kube, metrics
from runtime.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger("fivespot.leaderelection")

LEASE_GROUP: Final = "coordination.k8s.io"
LEASE_VERSION: Final = "v1"


class Action(StrEnum):
    ACQUIRE = "acquire"
    """Create the lease, or take it over (it is free, absent or expired): write now."""
    RENEW = "renew"
    """I hold it and it is time to renew (or reclaim a lease that still names me): write now."""
    HOLD = "hold"
    """I hold it; nothing to do until `at`."""
    STAND_BY = "stand-by"
    """Someone else holds it (or I must wait my turn): read it again at `at`."""
    LOST = "lost"
    """I was leading and must stop now: my renew deadline passed, or the lease names another."""


@dataclass(frozen=True)
class Timing:
    """Lease timings; client-go's defaults, plus how a candidate polls and how leases spread."""

    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0
    poll_s: float = 0.5
    """How often a candidate re-reads a lease someone else holds (bounds the takeover delay)."""
    spread_s: float = 0.5
    """Extra wait per lease already held before taking a free or expired one."""

    def __post_init__(self) -> None:
        if not 0 < self.retry_period_s < self.renew_deadline_s < self.lease_duration_s:
            raise ValueError("need 0 < retry_period < renew_deadline < lease_duration")
        if self.poll_s <= 0 or self.spread_s < 0:
            raise ValueError("need poll_s > 0 and spread_s >= 0")


@dataclass(frozen=True)
class LeaseView:
    """A lease as this replica last read it, and when (local monotonic) it first saw that state."""

    exists: bool
    holder: str | None
    duration_s: float
    resource_version: str | None
    observed_at: float
    transitions: int = 0


@dataclass(frozen=True)
class Verdict:
    action: Action
    at: float
    """Monotonic time: act now when `at <= now`, else when to decide again."""
    leading: bool
    """Whether this replica may act for the partition right now."""
    reason: str


def decide(
    view: LeaseView,
    me: str,
    now: float,
    held: int,
    timing: Timing,
    renewed_at: float | None,
) -> Verdict:
    """What to do about one partition's lease. `held`: leases I lead for other partitions;
    `renewed_at`: when I sent my last successful acquire/renew of this lease (None: not leading).
    """
    mine = view.exists and view.holder == me
    if renewed_at is not None:
        if not mine:
            return Verdict(Action.LOST, now, False, f"the lease now names {view.holder or 'nobody'}")
        deadline = renewed_at + timing.renew_deadline_s
        if now >= deadline:
            return Verdict(Action.LOST, now, False, "could not renew before the renew deadline")
        due = renewed_at + timing.retry_period_s
        if now >= due:
            return Verdict(Action.RENEW, now, True, "renewal due")
        return Verdict(Action.HOLD, due, True, "leading")
    if mine:
        return Verdict(Action.RENEW, now, False, "the lease still names me; reclaiming it")
    wait = held * timing.spread_s
    if not view.exists:
        eligible, why = view.observed_at + wait, "no lease exists"
    elif not view.holder:
        eligible, why = view.observed_at + wait, "the lease was released"
    else:
        eligible = view.observed_at + view.duration_s + wait
        why = f"{view.holder} stopped renewing"
    if now >= eligible:
        return Verdict(Action.ACQUIRE, now, False, why)
    holder = f"{view.holder} holds it" if view.exists and view.holder else why
    return Verdict(Action.STAND_BY, min(eligible, now + timing.poll_s), False,
                   f"{holder}; waiting (holding {held} other lease(s))")


def is_leading(renewed_at: float | None, now: float, timing: Timing) -> bool:
    """Whether a replica that last renewed at `renewed_at` may still act at `now`."""
    return renewed_at is not None and now < renewed_at + timing.renew_deadline_s


def default_identity() -> str:
    """POD_NAME (the Deployment sets it), else host, pid and a random suffix."""
    pod = os.environ.get("POD_NAME")
    if pod:
        return pod
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def micro_time(moment: datetime) -> str:
    """A metav1.MicroTime."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --- the I/O shell -----------------------------------------------------------------------------


@dataclass
class _State:
    view: LeaseView | None = None
    raw: dict[str, Any] | None = None
    renewed_at: float | None = None


Callback = Callable[[str], None]


class LeaderElector:
    """Campaigns for every given partition's lease in `namespace`; one thread per partition."""

    def __init__(
        self,
        api_client: client.ApiClient,
        namespace: str,
        leases: Mapping[str, str],
        identity: str,
        *,
        timing: Timing = Timing(),
        clock: Clock = SYSTEM_CLOCK,
        controller: str = "controller",
        on_started_leading: Callback | None = None,
        on_stopped_leading: Callback | None = None,
    ):
        """`leases`: partition -> lease name (`identities.lease_name(component, partition)`)."""
        self.api_client = api_client
        self.namespace = namespace
        self.leases = dict(leases)
        self.identity = identity
        self.timing = timing
        self.controller = controller
        self._clock = clock
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._lock = threading.Lock()
        self._campaign = threading.Lock()
        self._states = {p: _State() for p in self.leases}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        for partition in self.leases:
            metrics.IS_LEADER.labels(controller=controller, partition=partition).set(0)

    # --- public API -----------------------------------------------------------------------------

    def start(self) -> None:
        for partition in sorted(self.leases):
            thread = threading.Thread(target=self._run, args=(partition,), daemon=True,
                                      name=f"lease-{partition}")
            self._threads.append(thread)
            thread.start()

    def stop(self, release: bool = True, timeout: float = 5.0) -> None:
        """Stop campaigning; with `release`, stop acting and then clear every lease held."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout)
        for partition in sorted(self.leases):
            with self._lock:
                state = self._states[partition]
                was_leading = state.renewed_at is not None
                state.renewed_at = None
            if was_leading:
                self._stopped(partition, "shutting down")
                if release:
                    self._release(partition, state)

    def is_leading(self, partition: str) -> bool:
        """May this replica write for `partition` now? Check right before every write."""
        with self._lock:
            state = self._states.get(partition)
            renewed = state.renewed_at if state is not None else None
        return is_leading(renewed, self._clock.monotonic(), self.timing)

    def leading(self) -> frozenset[str]:
        return frozenset(p for p in self.leases if self.is_leading(p))

    # --- the loop -------------------------------------------------------------------------------

    def _held_except(self, partition: str) -> int:
        now = self._clock.monotonic()
        with self._lock:
            return sum(1 for p, s in self._states.items()
                       if p != partition and is_leading(s.renewed_at, now, self.timing))

    def _run(self, partition: str) -> None:
        while not self._stop.is_set():
            try:
                wait = self._step(partition)
            except Exception:
                log.exception("leader election step failed", extra={"partition": partition})
                wait = self.timing.poll_s
            self._stop.wait(max(wait, 0.0))

    def _step(self, partition: str) -> float:
        with self._lock:
            state = replace(self._states[partition])
        if state.view is None or state.renewed_at is None:
            state = self._read(partition)
        now = self._clock.monotonic()
        assert state.view is not None
        verdict = decide(state.view, self.identity, now, self._held_except(partition),
                         self.timing, state.renewed_at)
        if verdict.action is Action.ACQUIRE:
            with self._campaign:  # one acquisition at a time per process, so `held` is true
                state = self._read(partition)
                assert state.view is not None
                verdict = decide(state.view, self.identity, self._clock.monotonic(),
                                 self._held_except(partition), self.timing, state.renewed_at)
                if verdict.action is Action.ACQUIRE:
                    self._write(partition, state, acquire=True, reason=verdict.reason)
                    return self.timing.retry_period_s
        if verdict.action is Action.RENEW:
            if not self._write(partition, state, acquire=False, reason=verdict.reason):
                return min(self.timing.poll_s, self.timing.retry_period_s)
            return self.timing.retry_period_s
        if verdict.action is Action.LOST:
            with self._lock:
                self._states[partition].renewed_at = None
            self._stopped(partition, verdict.reason)
            return 0.0
        return verdict.at - self._clock.monotonic()

    def _path(self, partition: str | None = None) -> str:
        name = self.leases[partition] if partition is not None else None
        return kube.resource_path(LEASE_GROUP, LEASE_VERSION, "leases", self.namespace, name)

    def _read(self, partition: str) -> _State:
        """GET the lease; keep `observed_at` unless holder or resourceVersion changed."""
        try:
            raw: dict[str, Any] | None = kube.request(self.api_client, "GET", self._path(partition))
        except kube.ApiError as error:
            if not error.not_found:
                raise
            raw = None
        now = self._clock.monotonic()
        with self._lock:
            state = self._states[partition]
            view = _view(raw, now)
            old = state.view
            if old is not None and (old.exists, old.holder, old.resource_version) == (
                view.exists, view.holder, view.resource_version
            ):
                view = replace(view, observed_at=old.observed_at)
            state.view, state.raw = view, raw
            return replace(state)

    def _write(self, partition: str, state: _State, *, acquire: bool, reason: str) -> bool:
        """Create, take over or renew; True when this replica now holds the lease."""
        sent = self._clock.monotonic()
        stamp = micro_time(self._clock.now())
        name = self.leases[partition]
        duration = int(math.ceil(self.timing.lease_duration_s))
        raw = dict(state.raw or {})
        spec = dict(raw.get("spec") or {})
        taking_over = spec.get("holderIdentity") != self.identity
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=duration, renewTime=stamp)
        if taking_over:
            spec["acquireTime"] = stamp
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if raw else 0)
        try:
            if not raw:
                body = {"apiVersion": f"{LEASE_GROUP}/{LEASE_VERSION}", "kind": "Lease",
                        "metadata": {"name": name, "namespace": self.namespace}, "spec": spec}
                answer = kube.request(self.api_client, "POST", self._path(), body=body,
                                      timeout=self._write_timeout())
            else:
                body = {**raw, "spec": spec}
                answer = kube.request(self.api_client, "PUT", self._path(partition), body=body,
                                      timeout=self._write_timeout())
        except kube.ApiError as error:
            level = logging.INFO if error.conflict else logging.WARNING
            log.log(level, "lease write refused", extra={
                "partition": partition, "lease": name, "status": error.status,
                "error": error.message[:300]})
            with self._lock:
                self._states[partition].view = None  # read again before the next decision
            return False
        metrics.WRITES.labels(controller=self.controller, what="lease").inc()
        started = False
        with self._lock:
            current = self._states[partition]
            started = current.renewed_at is None
            current.renewed_at = sent
            current.raw = answer
            current.view = _view(answer, sent)
        if started:
            metrics.IS_LEADER.labels(controller=self.controller, partition=partition).set(1)
            log.info("started leading", extra={"partition": partition, "lease": name,
                                               "identity": self.identity, "why": reason})
            if self._on_started is not None:
                self._on_started(partition)
        return True

    def _write_timeout(self) -> tuple[float, float]:
        margin = self.timing.lease_duration_s - self.timing.renew_deadline_s
        return (min(2.0, margin / 2), max(margin / 2, 0.5))

    def _stopped(self, partition: str, reason: str) -> None:
        metrics.IS_LEADER.labels(controller=self.controller, partition=partition).set(0)
        log.warning("stopped leading", extra={"partition": partition, "identity": self.identity,
                                              "why": reason})
        if self._on_stopped is not None:
            self._on_stopped(partition)

    def _release(self, partition: str, state: _State) -> None:
        raw = state.raw
        if not raw:
            return
        spec = dict(raw.get("spec") or {})
        if spec.get("holderIdentity") != self.identity:
            return
        spec.pop("holderIdentity", None)
        stamp = micro_time(self._clock.now())
        spec.update(leaseDurationSeconds=1, renewTime=stamp, acquireTime=stamp)
        try:
            kube.request(self.api_client, "PUT", self._path(partition), body={**raw, "spec": spec},
                         timeout=(2.0, 3.0))
            log.info("released lease", extra={"partition": partition, "lease": self.leases[partition]})
        except kube.ApiError as error:
            log.warning("could not release lease", extra={"partition": partition,
                                                          "error": error.message[:300]})


def _view(raw: Mapping[str, Any] | None, now: float) -> LeaseView:
    if raw is None:
        return LeaseView(False, None, 0.0, None, now)
    spec = raw.get("spec") or {}
    return LeaseView(
        exists=True,
        holder=spec.get("holderIdentity") or None,
        duration_s=float(spec.get("leaseDurationSeconds") or 0),
        resource_version=(raw.get("metadata") or {}).get("resourceVersion"),
        observed_at=now,
        transitions=int(spec.get("leaseTransitions") or 0),
    )


def leases_for(component: str, partitions: Iterable[str]) -> dict[str, str]:
    """partition -> lease name, with the compiled RBAC's naming (`api.identities`)."""
    return {p: lease_name(component, p) for p in partitions}
