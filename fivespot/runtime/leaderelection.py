"""One coordination.k8s.io/v1 Lease per partition, and a leader per partition.

The decision is the pure function `decide(view, me, now, held, timing, renewed_at)`; the
`LeaderElector` only reads and writes Leases and keeps the clock. The rules that make it safe:

- Time is local and monotonic. A candidate measures a holder's lease from the moment *it*
  observed the holder's last change (resourceVersion), never from the `renewTime` written by
  another machine's clock (client-go's rule; clock skew cannot shorten a lease).
- A leader counts its own lease from the moment it *sent* its last successful renewal, and stops
  acting once `renew_deadline_s` has passed, which is shorter than `lease_duration_s`. The
  candidate observed that renewal no earlier than it was sent and waits the whole duration, so
  the old leader has stopped *deciding* before anyone else can start. A write it already sent
  may still land later — a client timeout does not bound when a write is committed (a paused or
  partitioned API server commits writes answered 504 many seconds after they were sent) — so
  safety does not rest on timing: every write a controller makes is conditional on the
  resourceVersion its decision read (`fivespot.runtime.manager`: status and finalizer writes, a target's
  field, a Machine's delete), so a late write of a deposed leader fails with 409 once the new
  leader has written (`tests/integration/test_deposed_leader.py`). Creates cannot be
  conditional; their names are fixed (a late create of what exists is an AlreadyExists).
- Every write is conditional on the resourceVersion read (optimistic concurrency): of two
  candidates only one update lands; the other sees 409 and reads again.
- Leadership spreads: a replica that already holds k leases waits `k * spread_s` longer before
  taking a free or expired one, so a replica holding none wins it.
- Leadership rebalances (replicas rarely start within `spread_s` of each other): a replica that
  holds at least two leases fewer than a peer asks that peer for one (`partition_to_ask_for`:
  the annotation `fivespot.finos.org/wanted-by` on one of the peer's leases, at most once a
  lease duration). The peer sees the request at its next renewal (the request changed the
  resourceVersion, so the renewal's conditional write fails and it reads again), and, if it
  still holds two more than the asker (`should_hand_back`), hands the lease back: it stops
  acting for the partition, lets its in-flight work finish (`drain`), and only then releases
  the lease naming the asker (`fivespot.finos.org/handed-to`); the asker takes it at once, any
  other replica only after a whole lease duration (the asker may have died meanwhile). One move
  always narrows the gap, so the moves end with no two replicas more than one lease apart. The
  Lease is the only lock throughout: the releaser stops acting before the release is written,
  and the asker acts only after its own acquire has landed. Asking writes only an annotation,
  which does not restart anyone's view of the holder's lease (a candidate measures the holder's
  *record* — holder, renew and acquire times, duration, transitions — as client-go does, not the
  resourceVersion), so a request to a dead holder cannot keep its lease alive.
- Graceful shutdown stops acting first, then releases each held lease (holder cleared), so a
  peer takes over after `spread` instead of a whole lease duration.
- A lone holder rests (decision 0043): once no standby has announced itself and it has sent no
  write for `idle_release_s`, it releases its lease (holder cleared) and leads on without one —
  its informers, queue and timers run, it decides, but it writes nothing. Its next write takes
  the lease again first (`writing`), so no write is ever sent without a held lease; a write in
  flight keeps it from resting. A replica that takes the free lease meanwhile leads from then
  on: the resting one hears it through its watch (or finds it when it tries to take the lease
  back) and stops leading, as any holder that lost its lease does.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from kubernetes import client

from fivespot.api.identities import lease_name
from fivespot.runtime import kube, metrics
from fivespot.runtime.clock import SYSTEM_CLOCK, Clock
from fivespot.runtime.cache import DELETED
from fivespot.runtime.informer import Informer

log = logging.getLogger("fivespot.leaderelection")

LEASE_GROUP: Final = "coordination.k8s.io"
LEASE_VERSION: Final = "v1"
WANTED_BY: Final = "fivespot.finos.org/wanted-by"
"""On a lease: the identity of a replica holding fewer leases that asks its holder for it."""
HANDED_TO: Final = "fivespot.finos.org/handed-to"
"""On a released lease: the replica it was handed back to (which may take it at once)."""
STANDBY: Final = "fivespot.finos.org/standby"
"""On a lease: `<identity> <time>` of the last replica that announced it stands by for it; the
holder keeps short leases while announcements keep coming (`Timing.solo_lease_duration_s`)."""


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


MAX_DUE: Final = 64
"""The most due writes an elector remembers per partition (the earliest are kept)."""


@dataclass(frozen=True)
class Timing:
    """Lease timings: client-go's duration and deadline, a renewal cadence tied to the duration,
    the longer lease of a holder no standby has announced itself to, how a candidate polls and
    how leases spread."""

    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0
    """The least time between two renewals (client-go renews at this period)."""
    poll_s: float = 0.5
    """How often a candidate re-reads a lease someone else holds (bounds the takeover delay)."""
    spread_s: float = 0.5
    """Extra wait per lease already held before taking a free or expired one."""
    renew_every_s: float | None = None
    """A holder renews this long after its last renewal (None: a third of the lease duration,
    so two more tries fit before the renew deadline); a failed renewal is retried at once."""
    solo_lease_duration_s: float | None = 120.0
    """The lease a holder writes while no standby has announced itself (None: always
    `lease_duration_s`); the renew cadence and deadline scale with it."""
    idle_release_s: float | None = 10.0
    """A holder no standby has announced itself to releases its lease once it has sent no write
    for this long and leads on at rest, taking the lease again before its next write (None: it
    keeps the lease and renews it)."""
    retake_ahead_s: float = 2.0
    """A holder at rest takes its lease back this long before a write it was told is due
    (`LeaderElector.expect_write`), so that write does not wait for the lease; and it does not
    rest while such a write is due within `idle_release_s`."""

    def __post_init__(self) -> None:
        if not 0 < self.retry_period_s < self.renew_deadline_s < self.lease_duration_s:
            raise ValueError("need 0 < retry_period < renew_deadline < lease_duration")
        if self.poll_s <= 0 or self.spread_s < 0:
            raise ValueError("need poll_s > 0 and spread_s >= 0")
        if not self.retry_period_s <= self.renew_interval_s < self.renew_deadline_s:
            raise ValueError("need retry_period <= renew_every < renew_deadline")
        if self.solo_lease_duration_s is not None and self.solo_lease_duration_s < self.lease_duration_s:
            raise ValueError("need solo_lease_duration >= lease_duration")
        if self.idle_release_s is not None and self.idle_release_s <= 0:
            raise ValueError("need idle_release > 0 (None: never)")
        if self.idle_release_s is not None and not 0 <= self.retake_ahead_s < self.idle_release_s:
            raise ValueError("need 0 <= retake_ahead < idle_release")

    @property
    def renew_interval_s(self) -> float:
        return self.renew_every_s if self.renew_every_s is not None else self.lease_duration_s / 3

    @property
    def margin_s(self) -> float:
        """How long before a candidate may take the lease its holder stops acting."""
        return self.lease_duration_s - self.renew_deadline_s

    def deadline_s(self, lease_s: float) -> float:
        """How long after sending a renewal of a `lease_s` lease its holder may act."""
        return lease_s - self.margin_s

    def renew_after_s(self, lease_s: float) -> float:
        """How long after a successful renewal of a `lease_s` lease the next is due."""
        return max(self.retry_period_s, self.renew_interval_s * lease_s / self.lease_duration_s)

    @property
    def standby_every_s(self) -> float:
        """How often a standby repeats its announcement (while its holder keeps short leases)."""
        return (self.solo_lease_duration_s or self.lease_duration_s) / 3


def lease_to_write(timing: Timing, peer_seen_at: float | None, now: float) -> float:
    """The lease duration a holder writes: the short one while a standby announced itself within
    the last solo lease duration (three of its announcements), else the solo one."""
    solo = timing.solo_lease_duration_s
    if solo is None or (peer_seen_at is not None and now < peer_seen_at + solo):
        return timing.lease_duration_s
    return solo


def rest_from(timing: Timing, active_at: float | None, peer_seen_at: float | None,
              in_flight: int, due_at: float | None = None) -> float | None:
    """When a holder may let its lease go and lead on at rest, if no write comes first (None:
    not while resting is off, a write is in flight, or the lease was never taken):
    `idle_release_s` after its last write (or after it took the lease), and no sooner than a
    solo lease after a standby last announced itself (a standby would take the free lease). A
    write due at `due_at` within `idle_release_s` of that counts as sent: letting the lease go
    just before it would cost a release and a retake for nothing."""
    if timing.idle_release_s is None or in_flight or active_at is None:
        return None
    at = active_at + timing.idle_release_s
    if peer_seen_at is not None:
        at = max(at, peer_seen_at + (timing.solo_lease_duration_s or timing.lease_duration_s))
    if due_at is not None and due_at < at + timing.idle_release_s:
        at = max(at, due_at + timing.idle_release_s)
    return at


def should_announce(view: LeaseView, me: str, now: float, timing: Timing,
                    announced_at: float | None, standby_changed_at: float | None) -> bool:
    """Whether a standby for a lease another replica holds writes its `STANDBY` announcement now:
    when no standby announced within `standby_every_s` (so the holder keeps short leases), or when
    the holder writes solo leases (it does not know of a standby yet), at most once a lease
    duration."""
    if timing.solo_lease_duration_s is None or not view.exists or not view.holder or view.holder == me:
        return False
    if view.duration_s > timing.lease_duration_s:
        return announced_at is None or now >= announced_at + timing.lease_duration_s
    return standby_changed_at is None or now >= standby_changed_at + timing.standby_every_s


@dataclass(frozen=True)
class LeaseView:
    """A lease as this replica last read it, and when (local monotonic) it first saw that state."""

    exists: bool
    holder: str | None
    duration_s: float
    resource_version: str | None
    observed_at: float
    transitions: int = 0
    wanted_by: str | None = None
    """A peer's request for this lease (`WANTED_BY`)."""
    handed_to: str | None = None
    """Whom the last holder handed this released lease to (`HANDED_TO`)."""
    standby: str | None = None
    """The last standby announcement (`STANDBY`)."""
    record: tuple[object, ...] = ()
    """The holder's record (holder, duration, acquire and renew times, transitions): what a
    candidate's clock for the lease restarts on, never an annotation."""


@dataclass(frozen=True)
class Verdict:
    action: Action
    at: float
    """Monotonic time: act now when `at <= now`, else when to decide again."""
    leading: bool
    """Whether this replica may act for the partition right now."""
    reason: str
    until: float | None = None
    """STAND_BY: when what I saw lets me take the lease (a watched lease need not be re-read
    before then: its watch wakes me on any change)."""


def decide(
    view: LeaseView,
    me: str,
    now: float,
    held: int,
    timing: Timing,
    renewed_at: float | None,
    lease_s: float | None = None,
    wanted_s: float | None = None,
) -> Verdict:
    """What to do about one partition's lease. `held`: leases I lead for other partitions;
    `renewed_at`: when I sent my last successful acquire/renew of this lease (None: not leading);
    `lease_s`: the duration I wrote then (default: the short one); `wanted_s`: the duration I
    would write now (a change is renewed at once: a standby waits for it).
    """
    mine = view.exists and view.holder == me
    if renewed_at is not None:
        if not mine:
            return Verdict(Action.LOST, now, False, f"the lease now names {view.holder or 'nobody'}")
        written = lease_s if lease_s is not None else timing.lease_duration_s
        deadline = renewed_at + timing.deadline_s(written)
        if now >= deadline:
            return Verdict(Action.LOST, now, False, "could not renew before the renew deadline")
        due = renewed_at + timing.renew_after_s(written)
        if wanted_s is not None and wanted_s < written:
            due = min(due, renewed_at + timing.retry_period_s)
        if now >= due:
            return Verdict(Action.RENEW, now, True, "renewal due")
        return Verdict(Action.HOLD, due, True, "leading")
    if mine:
        return Verdict(Action.RENEW, now, False, "the lease still names me; reclaiming it")
    wait = held * timing.spread_s
    if not view.exists:
        eligible, why = view.observed_at + wait, "no lease exists"
    elif not view.holder and view.handed_to == me:
        eligible, why = view.observed_at, "the lease was handed to me"
    elif not view.holder and view.handed_to:
        eligible = view.observed_at + timing.lease_duration_s + wait
        why = f"the lease was handed to {view.handed_to}"
    elif not view.holder:
        eligible, why = view.observed_at + wait, "the lease was released"
    else:
        eligible = view.observed_at + view.duration_s + wait
        why = f"{view.holder} stopped renewing"
    if now >= eligible:
        return Verdict(Action.ACQUIRE, now, False, why)
    holder = f"{view.holder} holds it" if view.exists and view.holder else why
    return Verdict(Action.STAND_BY, min(eligible, now + timing.poll_s), False,
                   f"{holder}; waiting (holding {held} other lease(s))", eligible)


def holdings(views: Mapping[str, LeaseView], me: str, leading: Iterable[str]) -> dict[str, list[str]]:
    """Identity -> the partitions (sorted) it holds, from the leases as this replica last read
    them; mine are the ones I lead."""
    lead = set(leading)
    held: dict[str, list[str]] = {me: []}
    for partition in sorted(set(views) | lead):
        view = views.get(partition)
        if partition in lead:
            held[me].append(partition)
        elif view is not None and view.exists and view.holder and view.holder != me:
            held.setdefault(view.holder, []).append(partition)
    return held


def partition_to_ask_for(views: Mapping[str, LeaseView], me: str, leading: Iterable[str]) -> str | None:
    """The one lease to ask a peer for, or None: the first (by name) of the peer holding the most,
    when it holds at least two more than I do (moving one then narrows the gap, never reverses
    it); the one I have asked for already while that still holds. One request at a time."""
    held = holdings(views, me, leading)
    mine = len(held[me])
    asked = [p for p, v in sorted(views.items()) if v.wanted_by == me and v.holder
             and v.holder != me and p not in held[me]]
    if asked:
        holder = views[asked[0]].holder
        assert holder is not None
        return asked[0] if len(held.get(holder, [])) >= mine + 2 else None
    peers = [(len(ps), h) for h, ps in held.items() if h != me]
    if not peers:
        return None
    most, peer = max(peers)
    return held[peer][0] if most >= mine + 2 else None


def should_hand_back(view: LeaseView, me: str, views: Mapping[str, LeaseView],
                     leading: Iterable[str]) -> str | None:
    """The peer to hand this lease (one I lead) back to: the one asking for it, when I still hold
    at least two more leases than it does; else None (the request is declined)."""
    asker = view.wanted_by
    if not asker or asker == me or view.holder != me:
        return None
    held = holdings(views, me, leading)
    return asker if len(held[me]) >= len(held.get(asker, [])) + 2 else None


def is_leading(renewed_at: float | None, now: float, timing: Timing,
               lease_s: float | None = None) -> bool:
    """Whether a replica that last renewed (a `lease_s` lease, default the short one) at
    `renewed_at` may still act at `now`."""
    written = lease_s if lease_s is not None else timing.lease_duration_s
    return renewed_at is not None and now < renewed_at + timing.deadline_s(written)


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
    draining: bool = False
    """Handing the lease back: no longer acting, in-flight work finishing, not yet released."""
    asked_at: float | None = None
    """When this replica last asked the holder for this lease (local monotonic)."""
    yield_until: float | None = None
    """After handing the lease back: leave it alone until then (local monotonic)."""
    lease_s: float | None = None
    """The duration of my last successful acquire/renew (what my deadline counts from)."""
    peer_seen_at: float | None = None
    """As holder: when I last saw a standby's announcement change (local monotonic)."""
    standby_seen: str | None = None
    """The last `STANDBY` announcement I saw on the lease."""
    standby_changed_at: float | None = None
    """When I saw it change (local monotonic)."""
    announced_at: float | None = None
    """As standby: when I last announced myself (local monotonic)."""
    reread: bool = False
    """The lease's watch saw a change that matters: read it before the next decision."""
    resting: bool = False
    """Leading with the lease released, nothing being written (`rest_from`): the next write takes
    the lease again first."""
    active_at: float | None = None
    """When a write last ended or began, or the lease was last taken (local monotonic)."""
    in_flight: int = 0
    """Writes between their permission and their answer (`writing`)."""
    due: frozenset[datetime] = frozenset()
    """When writes were said to be due (`expect_write`), those not yet passed (wall clock)."""


Callback = Callable[[str], None]
Drain = Callable[[str, float], bool]
"""`drain(partition, timeout_s)`: wait until no work for `partition` is in flight (the caller
already stopped acting for it); True when done within the timeout."""


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
        drain: Drain | None = None,
        watch: bool = True,
    ):
        """`leases`: partition -> lease name (`identities.lease_name(component, partition)`).
        `drain` finishes a partition's in-flight work before its lease is handed back; without
        it, the elector waits out the longest write (`lease_duration - renew_deadline`).
        `watch`: watch each lease, so a holder hears a standby's announcement (and a standby a
        release) at once instead of at its next renewal (or poll)."""
        self.api_client = api_client
        self.namespace = namespace
        self.leases = dict(leases)
        self.identity = identity
        self.timing = timing
        self.controller = controller
        self._clock = clock
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._drain = drain
        self._lock = threading.Lock()
        self._campaign = threading.Lock()
        self._states = {p: _State() for p in self.leases}
        self._taking = {p: threading.Lock() for p in self.leases}
        """Per partition: one rest or one retake of its lease at a time."""
        self._stop = threading.Event()
        self._wakes = {p: threading.Event() for p in self.leases}
        self._threads: list[threading.Thread] = []
        self._watches: list[Informer] = []
        self._watch_of: dict[str, Informer] = {}
        if watch:
            for partition, name in sorted(self.leases.items()):
                informer = Informer(api_client, LEASE_GROUP, LEASE_VERSION, "leases", namespace,
                                    resync_s=0, clock=clock, field_selector=f"metadata.name={name}")
                informer.add_handler(functools.partial(self._on_event, partition))
                self._watches.append(informer)
                self._watch_of[partition] = informer
        for partition in self.leases:
            metrics.IS_LEADER.labels(controller=controller, partition=partition).set(0)

    # --- public API -----------------------------------------------------------------------------

    def start(self) -> None:
        for informer in self._watches:
            informer.start()
        for partition in sorted(self.leases):
            thread = threading.Thread(target=self._run, args=(partition,), daemon=True,
                                      name=f"lease-{partition}")
            self._threads.append(thread)
            thread.start()

    def stop(self, release: bool = True, timeout: float = 5.0) -> None:
        """Stop campaigning; with `release`, stop acting and then clear every lease held."""
        self._stop.set()
        for wake in self._wakes.values():
            wake.set()
        for informer in self._watches:
            informer.stop(timeout)
        for thread in self._threads:
            thread.join(timeout)
        for partition in sorted(self.leases):
            with self._lock:
                state = self._states[partition]
                was_leading, held = state.renewed_at is not None or state.resting, \
                    state.renewed_at is not None
                state.renewed_at, state.resting = None, False
            if was_leading:
                self._stopped(partition, "shutting down")
                if release and held:
                    self._release(partition, state)

    def is_leading(self, partition: str) -> bool:
        """May this replica act for `partition` now (resting included: it decides, and a write
        goes through `writing`, which takes the lease again first)?"""
        with self._lock:
            state = self._states.get(partition)
            return state is not None and self._acting(state, self._clock.monotonic())

    def holds(self, partition: str) -> bool:
        """Does this replica still hold `partition`'s lease (leading, or handing it back with
        in-flight work finishing)? For that work only: new work checks `is_leading`."""
        with self._lock:
            state = self._states.get(partition)
            return state is not None and self._acting(state, self._clock.monotonic(),
                                                      draining=True)

    def _acting(self, state: _State, now: float, draining: bool = False) -> bool:
        """Leading (`draining`: or handing back with work finishing), or resting. Under `_lock`."""
        if state.resting:
            return True
        if state.draining and not draining:
            return False
        return is_leading(state.renewed_at, now, self.timing, state.lease_s)

    @contextmanager
    def writing(self, partition: str, held: bool = False) -> Iterator[bool]:
        """Around one write for `partition`: whether it may be sent (`is_leading`; `held`:
        `holds`), a resting lease taken again first; the write counts as in flight until the
        block ends, so the lease is not let go under it."""
        with self._lock:
            state = self._states.get(partition)
            if state is not None:
                state.in_flight += 1
                state.active_at = self._clock.monotonic()
            resting = state is not None and state.resting
        try:
            if resting:
                self._retake(partition)
            yield self.holds(partition) if held else self.is_leading(partition)
        finally:
            if state is not None:
                with self._lock:
                    state.in_flight -= 1
                    state.active_at = self._clock.monotonic()

    def leading(self) -> frozenset[str]:
        return frozenset(p for p in self.leases if self.is_leading(p))

    def expect_write(self, partition: str, at: datetime) -> None:
        """A write for `partition` is due at `at` (a schedule's next flip): while resting, the
        lease is taken back `retake_ahead_s` before it, and a held lease is not let go just
        before it (`rest_from`). A hint only: a write still takes the lease back first if it
        must, and a write that does not come costs what an idle spell costs (the lease let go
        `idle_release_s` later)."""
        if partition not in self._states or self.timing.idle_release_s is None:
            return
        now = self._clock.now()
        if at <= now:
            return
        with self._lock:
            state = self._states[partition]
            if at in state.due:
                return
            due = sorted(t for t in state.due if t > now)
            earliest = due[0] if due else None
            state.due = frozenset(sorted([*due, at])[:MAX_DUE])
        if earliest is None or at < earliest:
            self._wakes[partition].set()

    # --- the loop -------------------------------------------------------------------------------

    def _snapshot(self) -> tuple[dict[str, LeaseView], frozenset[str]]:
        """Every lease as last read, and the partitions I lead now."""
        now = self._clock.monotonic()
        with self._lock:
            views = {p: s.view for p, s in self._states.items() if s.view is not None}
            leading = frozenset(p for p, s in self._states.items() if self._acting(s, now))
        return views, leading

    def _held_except(self, partition: str) -> int:
        now = self._clock.monotonic()
        with self._lock:
            return sum(1 for p, s in self._states.items()
                       if p != partition and self._acting(s, now, draining=True))

    def _run(self, partition: str) -> None:
        while not self._stop.is_set():
            try:
                wait = self._step(partition)
            except Exception:
                log.exception("leader election step failed", extra={"partition": partition})
                wait = self.timing.poll_s
            wake = self._wakes[partition]
            if wake.wait(max(wait, 0.0)):
                wake.clear()

    def _on_event(self, partition: str, event: str, obj: Mapping[str, Any],
                  _old: Mapping[str, Any] | None) -> None:
        """The lease's watch saw a version. A holder's loop is woken to read the lease when it
        matters (another holder, a new announcement, a request). A candidate takes the version
        as read (a version older than one it already read only restarts its wait, the safe way)
        and is woken when the holder's record or a hand-back changed; it reads the lease again
        before it acquires."""
        now = self._clock.monotonic()
        raw = None if event == DELETED else dict(obj)
        seen = _view(raw, now)
        with self._lock:
            state = self._states[partition]
            old = state.view
            leading = state.renewed_at is not None
            if leading:
                matters = (seen.holder != self.identity
                           or (seen.standby is not None and seen.standby != state.standby_seen)
                           or (seen.wanted_by is not None
                               and (old is None or seen.wanted_by != old.wanted_by)))
                state.reread = state.reread or matters
            else:
                matters = old is None or (seen.exists, seen.holder, seen.record, seen.handed_to) != (
                    old.exists, old.holder, old.record, old.handed_to)
        if not leading:
            self._observed(partition, raw, now, candidate_only=True)
        if matters:
            self._wakes[partition].set()

    def _step(self, partition: str) -> float:
        with self._lock:
            state = replace(self._states[partition])
        if state.yield_until is not None and self._clock.monotonic() < state.yield_until:
            return min(self.timing.poll_s, state.yield_until - self._clock.monotonic())
        if state.view is None or state.reread or (
                state.renewed_at is None and not self._watched(partition)):
            state = self._read(partition)
        if state.resting:
            return self._step_resting(partition, state)
        now = self._clock.monotonic()
        assert state.view is not None
        verdict = decide(state.view, self.identity, now, self._held_except(partition),
                         self.timing, state.renewed_at, state.lease_s,
                         lease_to_write(self.timing, state.peer_seen_at, now))
        if verdict.action is Action.RENEW and state.renewed_at is not None and state.view.wanted_by:
            with self._campaign:  # one move at a time per process, so the counts are true
                views, leading = self._snapshot()
                to = should_hand_back(state.view, self.identity, views, leading)
                if to is not None:
                    self._hand_back(partition, to)
                    return self.timing.poll_s
        if verdict.action is Action.STAND_BY and state.view.holder:
            self._maybe_announce(partition, state)
            self._maybe_ask(partition, state)
        if verdict.action is Action.ACQUIRE:
            with self._campaign:  # one acquisition at a time per process, so `held` is true
                state = self._read(partition)
                assert state.view is not None
                verdict = decide(state.view, self.identity, self._clock.monotonic(),
                                 self._held_except(partition), self.timing, state.renewed_at)
                if verdict.action is Action.ACQUIRE:
                    if self._write(partition, state, acquire=True, reason=verdict.reason):
                        return self._until_next(partition, self._renew_after(partition))
                    return self.timing.retry_period_s
        if verdict.action is Action.RENEW:
            if not self._write(partition, state, acquire=False, reason=verdict.reason):
                return min(self.timing.poll_s, self.timing.retry_period_s)
            return self._until_next(partition, self._renew_after(partition))
        if verdict.action is Action.LOST:
            with self._lock:
                self._states[partition].renewed_at = None
                self._states[partition].lease_s = None
            self._stopped(partition, verdict.reason)
            return 0.0
        now = self._clock.monotonic()
        if verdict.action is Action.HOLD:
            if self._rest(partition):
                return self._step_resting(partition, replace(self._states[partition]))
            return self._until_next(partition, verdict.at - now)
        if verdict.action is Action.STAND_BY and verdict.until is not None and self._watched(partition):
            # the watch keeps the view and wakes me on any change; look again at the latest once
            # a lease duration (announcements, requests)
            return min(verdict.until, now + self.timing.lease_duration_s) - now
        return verdict.at - now

    def _until_next(self, partition: str, renew_in: float) -> float:
        """How long the loop may sleep while leading: until the next renewal (`renew_in`), or
        until the lease may be let go (`rest_from`), whichever comes first."""
        due_at = self._due_at(partition)
        with self._lock:
            current = self._states[partition]
            rest_at = rest_from(self.timing, current.active_at, current.peer_seen_at,
                                current.in_flight, due_at)
            in_flight = current.in_flight
        if rest_at is None:
            if in_flight and self.timing.idle_release_s is not None:
                return min(renew_in, self.timing.idle_release_s)  # look again once it ended
            return renew_in
        rest_in = rest_at - self._clock.monotonic()
        if rest_in <= 0:  # due, yet `_rest` declined (a release refused): not a busy loop
            return min(renew_in, self.timing.retry_period_s)
        return min(renew_in, rest_in)

    def _rest(self, partition: str) -> bool:
        """Let the lease go and lead on at rest, when `rest_from` says so; True when resting now. The
        state turns resting before the release is sent, so a write arriving meanwhile waits for
        the release (`_taking`) and then takes the lease again."""
        due_at = self._due_at(partition)
        with self._taking[partition]:
            with self._lock:
                state = self._states[partition]
                now = self._clock.monotonic()
                at = rest_from(self.timing, state.active_at, state.peer_seen_at, state.in_flight,
                               due_at)
                if state.draining or at is None or now < at \
                        or not is_leading(state.renewed_at, now, self.timing, state.lease_s):
                    return False
                held = replace(state)
                state.resting, state.renewed_at, state.lease_s = True, None, None
            answer = self._release(partition, held, retry=False)
            if answer is None:  # not released (a request or announcement landed): hold on
                with self._lock:
                    state = self._states[partition]
                    state.resting, state.renewed_at, state.lease_s = False, held.renewed_at, held.lease_s
                    state.reread = True
                return False
            self._observed(partition, answer, self._clock.monotonic())
            log.info("resting: released the lease while nothing is written",
                     extra={"partition": partition, "identity": self.identity})
            return True

    def _retake(self, partition: str, reason: str = "a write is due") -> None:
        """Take a resting lease again before a write (or shortly before one is due); if another
        replica took it meanwhile, stop leading the partition (the write is not sent)."""
        with self._taking[partition]:
            with self._lock:
                state = replace(self._states[partition])
            if not state.resting:
                return
            taken = False
            for attempt in range(2):
                view = state.view
                if view is not None and view.exists and view.holder not in (None, self.identity):
                    break
                if view is not None and (state.raw is not None or not view.exists):
                    taken = self._write(partition, state, acquire=True, reason=reason,
                                        retake=True)
                    if taken:
                        break
                state = self._read(partition)
            self._end_rest(partition, taken, state)

    def _end_rest(self, partition: str, taken: bool, state: _State) -> None:
        """Resting ends: with the lease taken again, or lost to the replica named on it."""
        with self._lock:
            current = self._states[partition]
            if not current.resting:
                return
            current.resting = False
            if taken:
                current.active_at = self._clock.monotonic()
        if taken:
            log.info("took the lease again for a write", extra={"partition": partition,
                                                               "identity": self.identity})
        else:
            holder = state.view.holder if state.view is not None else None
            self._stopped(partition, f"{holder or 'another replica'} took the lease while this "
                                     "replica rested")
        self._wakes[partition].set()

    def _step_resting(self, partition: str, state: _State) -> float:
        """While resting: nothing is written; a lease another replica took ends the rest, and
        a write due soon (`expect_write`) takes the lease back ahead of it. The watch wakes the
        loop on any change; without it the lease is read once a lease duration."""
        view = state.view
        if view is not None and view.exists and view.holder not in (None, self.identity):
            with self._taking[partition]:
                self._end_rest(partition, False, state)
            return 0.0
        due_in = self._due_in(partition)
        if due_in is not None and due_in <= self.timing.retake_ahead_s:
            self._retake(partition, reason="a write is due shortly")
            return 0.0
        wait = (self.timing.solo_lease_duration_s or self.timing.lease_duration_s) \
            if self._watched(partition) else self.timing.lease_duration_s
        return wait if due_in is None else min(wait, due_in - self.timing.retake_ahead_s)

    def _due_in(self, partition: str) -> float | None:
        """Seconds until the earliest write said to be due for `partition` (`expect_write`),
        None when none is; passed ones are forgotten."""
        now = self._clock.now()
        with self._lock:
            state = self._states[partition]
            if state.due and min(state.due) <= now:
                state.due = frozenset(t for t in state.due if t > now)
            earliest = min(state.due, default=None)
        return (earliest - now).total_seconds() if earliest is not None else None

    def _due_at(self, partition: str) -> float | None:
        """`_due_in` on the monotonic clock (what `rest_from` compares with)."""
        due_in = self._due_in(partition)
        return None if due_in is None else self._clock.monotonic() + due_in

    def _watched(self, partition: str) -> bool:
        """Whether this partition's lease watch is synced and not stalled."""
        informer = self._watch_of.get(partition)
        return informer is not None and informer.healthy()

    def _renew_after(self, partition: str) -> float:
        with self._lock:
            state = self._states[partition]
            lease_s = state.lease_s if state.lease_s is not None else self.timing.lease_duration_s
        return self.timing.renew_after_s(lease_s)

    def _maybe_announce(self, partition: str, state: _State) -> None:
        """Tell the holder a standby waits (`should_announce`), so it keeps short leases: a
        write of the `STANDBY` annotation only (candidates' clocks run on the holder's record)."""
        now = self._clock.monotonic()
        assert state.view is not None
        if not should_announce(state.view, self.identity, now, self.timing, state.announced_at,
                               state.standby_changed_at):
            return
        raw = state.raw
        if not raw:
            return
        body = _annotated(raw, {STANDBY: f"{self.identity} {micro_time(self._clock.now())}"})
        with self._lock:
            self._states[partition].announced_at = now
        try:
            answer = kube.request(self.api_client, "PUT", self._path(partition), body=body,
                                  timeout=self._write_timeout())
        except kube.ApiError as error:
            log.info("could not announce a standby", extra={
                "partition": partition, "status": error.status, "error": error.message[:300]})
            return
        metrics.WRITES.labels(controller=self.controller, what="lease").inc()
        log.info("announced a standby", extra={"partition": partition,
                                               "holder": state.view.holder,
                                               "identity": self.identity})
        self._observed(partition, answer, now)

    def _observed(self, partition: str, raw: dict[str, Any] | None, now: float,
                  candidate_only: bool = False) -> _State:
        """Record a read (or a write's answer) of the lease: `observed_at` is kept unless the
        holder or its record changed; a changed `STANDBY` announcement is noted (as holder: a
        peer waits). `candidate_only` (a watch event, which may be older than what a holder
        just wrote): ignored once this replica leads."""
        with self._lock:
            state = self._states[partition]
            if candidate_only and state.renewed_at is not None:
                return replace(state)
            view = _view(raw, now)
            old = state.view
            if old is not None and (old.exists, old.holder, old.record) == (
                view.exists, view.holder, view.record
            ):
                view = replace(view, observed_at=old.observed_at)
            if view.standby and view.standby != state.standby_seen:
                state.standby_seen, state.standby_changed_at = view.standby, now
                if view.holder == self.identity:
                    state.peer_seen_at = now
            state.view, state.raw, state.reread = view, raw, False
            return replace(state)

    def _path(self, partition: str | None = None) -> str:
        name = self.leases[partition] if partition is not None else None
        return kube.resource_path(LEASE_GROUP, LEASE_VERSION, "leases", self.namespace, name)

    def _maybe_ask(self, partition: str, state: _State) -> None:
        """Ask this lease's holder for it, when `partition_to_ask_for` picks it (at most once a
        lease duration per lease: a holder that declines is not asked again at once)."""
        now = self._clock.monotonic()
        assert state.view is not None
        if state.view.wanted_by == self.identity:
            return
        if state.asked_at is not None and now < state.asked_at + self.timing.lease_duration_s:
            return
        with self._campaign:
            views, leading = self._snapshot()
            if partition_to_ask_for(views, self.identity, leading) != partition:
                return
            raw = state.raw
            if not raw:
                return
            body = _annotated(raw, {WANTED_BY: self.identity})
            try:
                answer = kube.request(self.api_client, "PUT", self._path(partition), body=body,
                                      timeout=self._write_timeout())
            except kube.ApiError as error:
                log.info("could not ask for a lease", extra={
                    "partition": partition, "status": error.status, "error": error.message[:300]})
                return
            log.info("asked for a lease", extra={"partition": partition, "holder": state.view.holder,
                                                  "identity": self.identity})
            with self._lock:
                self._states[partition].asked_at = now
            self._observed(partition, answer, now)

    def _hand_back(self, partition: str, to: str) -> None:
        """Stop acting for `partition`, let its in-flight work finish, then release its lease
        naming `to`. If the work does not finish in time, nothing is released: the lease expires
        (we stopped acting), as after a crash. Either way this replica leaves the partition alone
        for one lease duration, so it neither reclaims it nor races `to` for it."""
        with self._lock:
            state = self._states[partition]
            if state.renewed_at is None:
                return
            state.draining = True
        self._stopped(partition, f"handing the lease back to {to}, which holds fewer")
        # An in-flight write ends within its timeout, which is below this margin.
        margin = self.timing.margin_s
        if self._drain is not None:
            drained = self._drain(partition, margin)
        else:
            drained = not self._stop.wait(margin)
        with self._lock:
            snapshot = replace(self._states[partition])
        if drained:  # conditional on the version we hold: a takeover meanwhile makes it a no-op
            self._release(partition, snapshot, handed_to=to)
        else:
            log.warning("in-flight work did not finish in time; letting the lease expire",
                        extra={"partition": partition, "identity": self.identity})
        with self._lock:
            state = self._states[partition]
            state.renewed_at, state.draining, state.view = None, False, None
            state.lease_s = None
            state.yield_until = self._clock.monotonic() + self.timing.lease_duration_s

    def _read(self, partition: str) -> _State:
        """GET the lease; keep `observed_at` unless the holder or its record changed."""
        try:
            raw: dict[str, Any] | None = kube.request(self.api_client, "GET", self._path(partition))
        except kube.ApiError as error:
            if not error.not_found:
                raise
            raw = None
        return self._observed(partition, raw, self._clock.monotonic())

    def _write(self, partition: str, state: _State, *, acquire: bool, reason: str,
               retake: bool = False) -> bool:
        """Create, take over or renew; True when this replica now holds the lease. `retake`:
        the lease this replica released to rest (no holder to come back)."""
        sent = self._clock.monotonic()
        stamp = micro_time(self._clock.now())
        name = self.leases[partition]
        peer_seen_at = state.peer_seen_at
        if acquire and not retake and state.view is not None and (
                state.view.holder or state.view.handed_to or state.view.standby):
            peer_seen_at = sent  # a holder that may come back, or a standby: start short
        lease_s = lease_to_write(self.timing, peer_seen_at, sent)
        duration = int(math.ceil(lease_s))
        raw = _annotated(state.raw, {WANTED_BY: None, HANDED_TO: None}) if state.raw else {}
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
            started = current.renewed_at is None and not current.resting
            if started:
                current.active_at = sent
            current.renewed_at, current.lease_s = sent, lease_s
            if peer_seen_at is not None:
                current.peer_seen_at = max(peer_seen_at, current.peer_seen_at or peer_seen_at)
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
        margin = self.timing.margin_s
        return (min(2.0, margin / 2), max(margin / 2, 0.5))

    def _stopped(self, partition: str, reason: str) -> None:
        metrics.IS_LEADER.labels(controller=self.controller, partition=partition).set(0)
        log.warning("stopped leading", extra={"partition": partition, "identity": self.identity,
                                              "why": reason})
        if self._on_stopped is not None:
            self._on_stopped(partition)

    def _release(self, partition: str, state: _State, handed_to: str | None = None,
                 retry: bool = True) -> dict[str, Any] | None:
        """Clear the holder (conditional on the version we hold; on a conflict — a peer's request
        landed meanwhile — read once and try again, with `retry`); the released lease, or None
        when not released. `handed_to`: the peer that may take it at once."""
        raw = state.raw
        for attempt in range(2):
            if not raw:
                return None
            spec = dict(raw.get("spec") or {})
            if spec.get("holderIdentity") != self.identity:
                return None
            spec.pop("holderIdentity", None)
            stamp = micro_time(self._clock.now())
            spec.update(leaseDurationSeconds=1, renewTime=stamp, acquireTime=stamp)
            body = {**_annotated(raw, {WANTED_BY: None, HANDED_TO: handed_to}), "spec": spec}
            try:
                answer: dict[str, Any] = kube.request(self.api_client, "PUT", self._path(partition),
                                                      body=body, timeout=(2.0, 3.0))
                metrics.WRITES.labels(controller=self.controller, what="lease").inc()
                log.info("released lease", extra={"partition": partition,
                                                  "lease": self.leases[partition],
                                                  "handed_to": handed_to})
                return answer
            except kube.ApiError as error:
                if not error.conflict or attempt or not retry:
                    log.log(logging.INFO if error.conflict else logging.WARNING,
                            "could not release lease", extra={"partition": partition,
                                                              "error": error.message[:300]})
                    return None
            try:
                raw = kube.request(self.api_client, "GET", self._path(partition), timeout=(2.0, 3.0))
            except kube.ApiError:
                return None
        return None


def _view(raw: Mapping[str, Any] | None, now: float) -> LeaseView:
    if raw is None:
        return LeaseView(False, None, 0.0, None, now)
    spec = raw.get("spec") or {}
    meta = raw.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    return LeaseView(
        exists=True,
        holder=spec.get("holderIdentity") or None,
        duration_s=float(spec.get("leaseDurationSeconds") or 0),
        resource_version=meta.get("resourceVersion"),
        observed_at=now,
        transitions=int(spec.get("leaseTransitions") or 0),
        wanted_by=annotations.get(WANTED_BY) or None,
        handed_to=annotations.get(HANDED_TO) or None,
        standby=annotations.get(STANDBY) or None,
        record=tuple(spec.get(k) for k in ("holderIdentity", "leaseDurationSeconds", "acquireTime",
                                           "renewTime", "leaseTransitions")),
    )


def _annotated(raw: Mapping[str, Any], changes: Mapping[str, str | None]) -> dict[str, Any]:
    """A copy of the lease with these annotations set (None: removed)."""
    meta = dict(raw.get("metadata") or {})
    annotations = dict(meta.get("annotations") or {})
    for key, value in changes.items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
    meta["annotations"] = annotations
    return {**raw, "metadata": meta}


def leases_for(component: str, partitions: Iterable[str]) -> dict[str, str]:
    """partition -> lease name, with the compiled RBAC's naming (`fivespot.api.identities`)."""
    return {p: lease_name(component, p) for p in partitions}
