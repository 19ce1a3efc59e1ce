"""Another writer of the governed field: seeing the fight, saying so, and backing off.

The capacity controller is level-triggered: whenever the field does not read what it holds it
writes it back. A tenant's GitOps engine (an Argo CD Application with self-heal, a Flux
Kustomization re-applying git's value at every interval), an HPA or KEDA writing `/scale`, or a
person with `kubectl scale` would then ping-pong with it forever, each side undoing the other.
This module is the pure judgement of that case (docs/design/decisions/0029):

- a *repair* is a write of the value the controller already holds the field at (the status's
  `writtenValue`), made because the field no longer reads it: someone else wrote it since;
- the first `IMMEDIATE_REPAIRS` (4) repairs of a contest are made at once (a tenant sync that
  applies git's value is undone within the reconcile, well under a second);
- every later repair waits `repair_delay(n)` after the previous one: 5 s, doubling, capped at
  5 minutes. So once contested the controller writes the field at most `MAX_WRITES_PER_MINUTE`
  times in any minute, and once every 5 minutes in the long run, whatever the other writer does;
- from the first repair that names a writer other than fivespot, FieldContested=True names it
  (read from the target's managedFields) with the fix, and a Warning event is recorded;
- once the field has read the controller's value for `quiet(n)` after the last repair (at least
  a minute), the contest is over: FieldContested is removed and the count starts again.

All state is in `status.contest` (manager, repairs, lastRepairTime), so a restart loses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from fivespot.api.fieldgovernance import GITOPS_FIX
from fivespot.api.identities import CAPACITY_CONTROLLER
from fivespot.api.kinds.scheduled_capacity import ContestState
from fivespot.controllers.capacity.conditions import FIELD_CONTESTED as FIELD_CONTESTED
from fivespot.controllers.capacity.conditions import Reason

REWRITTEN: Final = Reason.REWRITTEN

IMMEDIATE_REPAIRS: Final = 4
"""Repairs of one contest made without waiting: a tenant's Argo CD applies git's value up to twice
per commit (the sync, then a self-heal of the same revision while its status is still the
pre-sync OutOfSync), and two commits a minute apart must each be undone within a second."""
BACKOFF_BASE: Final = timedelta(seconds=5)
BACKOFF_CAP: Final = timedelta(minutes=5)
QUIET_MIN: Final = timedelta(minutes=1)
MAX_WRITES_PER_MINUTE: Final = 7
"""0, 0, 0, 0, +5 s, +10 s, +20 s: the most repairs any 60 s can hold (the next is 40 s later)."""



def repair_delay(repairs: int) -> timedelta:
    """How long after the previous repair the next one waits, with `repairs` already made."""
    if repairs < IMMEDIATE_REPAIRS:
        return timedelta(0)
    doublings: int = min(repairs - IMMEDIATE_REPAIRS, 16)
    return min(BACKOFF_BASE * (1 << doublings), BACKOFF_CAP)


def quiet(repairs: int) -> timedelta:
    """How long the field must read the controller's value after the last repair for the
    contest to be over."""
    return max(QUIET_MIN, 2 * repair_delay(repairs))


def ongoing(prior: ContestState | None, now: datetime) -> ContestState | None:
    """The contest still running at `now` (None once the quiet time has passed)."""
    if prior is None or prior.last_repair_time is None:
        return None
    return prior if now - prior.last_repair_time <= quiet(prior.repairs) else None


@dataclass(frozen=True)
class Judgement:
    """What to do about the field: write now or not, the state to keep, when to look again."""

    write_now: bool
    state: ContestState | None
    requeue_at: datetime | None


def judge(prior: ContestState | None, repair: bool, writer: str | None, now: datetime) -> Judgement:
    """`repair`: the decision would write the value the field is already held at (someone else
    changed it). `writer`: the field manager owning the field now, if the shell read it."""
    current = ongoing(prior, now)
    if not repair:
        if current is None:
            return Judgement(True, None, None)
        assert current.last_repair_time is not None
        return Judgement(True, current, current.last_repair_time + quiet(current.repairs) +
                         timedelta(seconds=1))
    if writer == CAPACITY_CONTROLLER:
        # our own write, read before its echo: nothing to count, nothing to report
        return Judgement(True, current, None)
    made = current.repairs if current is not None else 0
    due = (current.last_repair_time + repair_delay(made)
           if current is not None and current.last_repair_time is not None else now)
    manager = writer if writer is not None else (current.manager if current is not None else "")
    if now < due:
        waiting = ContestState(manager=manager, repairs=made,
                               last_repair_time=current.last_repair_time if current else None)
        return Judgement(False, waiting, due)
    # looked at again once the quiet time has passed, to clear the condition (the echo of our
    # own write brings no reconcile; another rewrite does, through the target's watch)
    return Judgement(True, ContestState(manager=manager, repairs=made + 1, last_repair_time=now),
                     now + quiet(made + 1) + timedelta(seconds=1))


def contested_message(manager: str, path: str, target: str, state: ContestState,
                      waiting_until: datetime | None) -> str:
    """FieldContested's message (and the Warning event's): who, what it costs, and the fix."""
    who = f"field manager {manager}" if manager else "another field manager"
    then = (f"; the next repair waits until {waiting_until.strftime('%Y-%m-%dT%H:%M:%SZ')}"
            if waiting_until is not None else "")
    return (
        f"{who} rewrote {path} of {target} after this ScheduledCapacity wrote it "
        f"({state.repairs} repair{'s' if state.repairs != 1 else ''} so far{then}): a field has "
        f"one governor, and repairs back off to one per {int(BACKOFF_CAP.total_seconds()) // 60} "
        f"minutes. Stop the other writer. {GITOPS_FIX}. For a HorizontalPodAutoscaler or a "
        "KEDA ScaledObject, gate its spec.minReplicas (spec.minReplicaCount) instead. The "
        "condition clears by itself once the field stays put"
    )
