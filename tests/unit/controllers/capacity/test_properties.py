"""Properties of `decide` over generated inputs and generated event sequences.

The decision table shows the transitions; these show the invariants hold everywhere: only 0 or
activeValue is ever written, a conflicted object never gets the active value (in any order of
events, with each decision's status fed back), Ready is True exactly when settled (kstatus), a refused spec is
never written, a transient error changes nothing, and a world that stops changing reaches a
status that stops changing (so the shell stops patching).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from itertools import product
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fivespot.api.bundle import Consumer
from fivespot.api.fieldgovernance import Claim, GovernedBy, overlaps, precedence, standings
from fivespot.api.fieldpath import capacity_path_error
from fivespot.api.kinds.scheduled_capacity import (
    ConditionStatus,
    Phase,
    ScheduledCapacitySpec,
    ScheduledCapacityStatus,
)
from fivespot.api.provider_contract import (
    LookupFailed,
    Resolved,
    ScheduleObservation,
    Unresolved,
    UnresolvedReason,
)
from fivespot.controllers.capacity import contest
from fivespot.controllers.capacity.conditions import FIELD_GOVERNANCE_CONFLICT, READY
from fivespot.controllers.capacity.decide import Decision, decide, status_patch
from fivespot.controllers.capacity.observations import (
    ABSENT,
    DecisionInput,
    MachineNode,
    MachinesObservation,
    TargetFound,
    TargetNotFound,
    TargetObservation,
    parse_spec,
)

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
NODES = ("worker-1", "worker-3", "worker-5")
ENTRY = Consumer(
    name="agents",
    group="pools.example.com",
    version="v1",
    kind="Pool",
    resource="pools",
    capacity_paths=("spec.warmReplicas", "spec.pool.size"),
    drained_path="status.inUse",
    max_active_value=16,
)


def examples(count: int) -> settings:
    """A budget of `count` generated cases; no per-example deadline on shared CI cores."""
    return settings(max_examples=count, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- strategies ------------------------------------------------------------------------------------
# Inputs are drawn from small precomputed pools with one draw each: drawing, not deciding, is
# what costs time here, and the pools still cover every branch of `decide`.

VALID_PATHS = ("spec.warmReplicas", "spec.pool.size")
OTHER_PATHS = ("spec.maxReplicas", "metadata.labels", "status.inUse", "spec..x")
HANDBACKS: tuple[dict[str, str] | None, ...] = (
    None,
    {"drainedPath": "status.inUse", "timeout": "15m"},
    {"drainedPath": "status.inUse", "timeout": "1s"},
    {"drainedPath": "status.inUse", "timeout": "1h30m"},
    {"drainedPath": "status.busy", "timeout": "15m"},
)


def spec_dict(
    path: str, value: int, enabled: bool, kill: bool, handback: dict[str, str] | None, node: str | None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedule": {
            "apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
            "kind": "ManualSchedule",
            "name": "desk",
        },
        "targetRef": {"apiVersion": "pools.example.com/v1", "kind": "Pool", "name": "agents"},
        "capacity": {"path": path, "activeValue": value},
        "enabled": enabled,
        "killSwitch": kill,
    }
    if handback is not None:
        spec["handback"] = handback
    if node is not None:
        spec["nodeName"] = node
    return spec


VALID_SPECS = tuple(
    spec_dict(path, value, enabled, kill, handback, node)
    for path, value, enabled, kill, handback, node in product(
        VALID_PATHS,
        (10, 1, 16, 0),
        (True, True, True, False),
        (False, False, False, True),
        HANDBACKS[:4],
        (None, *NODES),
    )
)
REFUSED_SPECS = tuple(
    spec_dict(path, value, True, kill, handback, node)
    for path, value, kill, handback, node in product(
        VALID_PATHS + OTHER_PATHS, (10, 17), (False, True), HANDBACKS, (None, "worker-3")
    )
    if path in OTHER_PATHS or value > ENTRY.max_active_value or handback is HANDBACKS[4]
) + ({key: v for key, v in VALID_SPECS[0].items() if key != "targetRef"},)

COUNTERS: tuple[object, ...] = (*range(0, 21), ABSENT, None, "0", "10", True, 2.0, 0.0, 1.5, [0])
SCHEDULES: tuple[ScheduleObservation, ...] = (
    *(Resolved(True), Resolved(False)) * 3,
    *(Unresolved(reason, "unresolved") for reason in UnresolvedReason),
    LookupFailed("provider 503"),
)
_ON = (MachineNode("rack-a", "worker-1"), MachineNode("rack-b", "worker-3"),
       MachineNode("rack-c", "worker-3"), MachineNode("rack-d", "worker-5"))
MACHINES: tuple[MachinesObservation, ...] = (
    *(tuple(m for m, keep in zip(_ON, mask) if keep) for mask in product((False, True), repeat=4)),
    LookupFailed("list timeout"),
)
ALLOWLISTS: tuple[Consumer | None, ...] = (
    *(ENTRY,) * 12,
    None,
    ENTRY.model_copy(update={"max_active_value": 5}),
    ENTRY.model_copy(update={"drained_path": None}),
    ENTRY.model_copy(update={"kind": "OtherPool"}),
)

# Built once: a strategy computes its label by hashing every element, which for frozen models is
# the whole cost of a draw if the strategy is rebuilt per draw.
counters = st.one_of(st.just(0), st.sampled_from(COUNTERS))
_VALID = tuple(parse_spec(spec) for spec in VALID_SPECS)
specs = st.sampled_from(_VALID * 4 + tuple(parse_spec(spec) for spec in REFUSED_SPECS))
schedules = st.sampled_from(SCHEDULES)
machine_lists = st.sampled_from(MACHINES)
allowlists = st.sampled_from(ALLOWLISTS)
targets: st.SearchStrategy[TargetObservation] = st.one_of(
    st.builds(TargetFound, counters, counters),
    st.builds(TargetFound, counters, counters),
    st.builds(TargetFound, counters, counters),
    st.sampled_from([TargetNotFound(), LookupFailed("target timeout")]),
)


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[DecisionInput, Decision]]:
    """One to four reconciles of one object, each fed the status the previous one decided, now
    and then under a different spec (as after an edit). Every input after the first has a prior
    that `decide` really produced."""
    machines = draw(machine_lists)
    allowlist = draw(allowlists)
    spec = draw(specs)
    elapsed = 0
    schedule: ScheduleObservation
    target: TargetObservation
    history: list[tuple[DecisionInput, Decision]] = []
    for generation in range(1, draw(st.integers(1, 4)) + 1):
        if draw(st.integers(0, 9)) == 0:
            spec = draw(specs)
        elapsed += draw(st.sampled_from((0, 30, 600, 3600)))
        still: bool = draw(st.booleans())
        if history and still:
            # The world held still apart from the last write landing.
            last_input, last = history[-1]
            schedule, target = last_input.schedule, applied(last_input.target, last.write)
        else:
            schedule, target = draw(schedules), draw(targets)
        inp = DecisionInput(
            namespace="tenant-a",
            name="agents-capacity",
            generation=generation,
            spec=spec,
            schedule=schedule,
            target=target,
            machines=machines,
            allowlist=allowlist,
            prior=history[-1][1].status if history else None,
            now=NOW + timedelta(seconds=elapsed),
        )
        history.append((inp, decide(inp)))
    return history


# --- helpers -----------------------------------------------------------------------------------------


def active_value(inp: DecisionInput) -> int | None:
    return inp.spec.capacity.active_value if isinstance(inp.spec, ScheduledCapacitySpec) else None


def conflicted(inp: DecisionInput, machine_nodes: frozenset[str]) -> bool:
    return isinstance(inp.spec, ScheduledCapacitySpec) and inp.spec.node_name in machine_nodes


def observed_nodes(inp: DecisionInput) -> frozenset[str]:
    return frozenset(m.node for m in inp.machines) if isinstance(inp.machines, tuple) else frozenset()


def ready_is_true(decision: Decision) -> bool:
    ready = decision.status.condition(READY)
    return ready is not None and ready.status is ConditionStatus.TRUE


def applied(target: TargetObservation, write: int | None) -> TargetObservation:
    """The target as the next reconcile sees it after the shell applied `write`."""
    if write is None or not isinstance(target, TargetFound):
        return target
    return replace(target, value=write)


def as_json(status: ScheduledCapacityStatus) -> dict[str, Any]:
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def merge_patch(document: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386, as the API server applies it."""
    result = dict(document)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            base = result.get(key)
            result[key] = merge_patch(base if isinstance(base, dict) else {}, value)
        else:
            result[key] = value
    return result


# --- the invariants, each checked on every decision ---------------------------------------------


def only_zero_or_the_active_value_is_written(inp: DecisionInput, decision: Decision) -> None:
    assert decision.write in (None, 0, active_value(inp))
    if decision.write is not None:
        assert isinstance(inp.spec, ScheduledCapacitySpec) and inp.allowlist is not None
        assert isinstance(inp.target, TargetFound)
        assert decision.write_path == inp.spec.capacity.path
        assert capacity_path_error(decision.write_path) is None
        assert decision.write_path in inp.allowlist.capacity_paths
        assert decision.write <= inp.allowlist.max_active_value


def a_conflicted_object_never_gets_the_active_value(
    inp: DecisionInput, decision: Decision, governed: frozenset[str]
) -> None:
    """`governed` is the truth, which the observation may have failed to read."""
    if conflicted(inp, governed) or conflicted(inp, observed_nodes(inp)):
        assert decision.write in (None, 0)


UNSETTLED_PHASES = (Phase.PENDING, Phase.HANDING_BACK, Phase.HANDBACK_TIMED_OUT, Phase.ERROR)


def ready_is_true_exactly_when_settled(decision: Decision) -> None:
    """kstatus: Ready=True exactly when neither Reconciling nor Stalled is (both only ever True);
    always in Active, never in a phase that is still moving or stuck."""
    status = decision.status
    unsettled = [c for c in status.conditions if c.type in ("Reconciling", "Stalled")]
    assert all(c.status is ConditionStatus.TRUE for c in unsettled) and len(unsettled) <= 1
    assert ready_is_true(decision) == (not unsettled)
    if status.phase is Phase.ACTIVE:
        assert ready_is_true(decision)
    if status.phase in UNSETTLED_PHASES:
        assert not ready_is_true(decision)


def error_never_writes(decision: Decision) -> None:
    if decision.status.phase is Phase.ERROR:
        assert decision.write is None
        assert decision.requeue_at is None


def a_transient_error_changes_nothing(inp: DecisionInput, decision: Decision) -> None:
    if decision.transient is not None:
        assert decision.write is None
        assert decision.events == ()
        if inp.prior is not None:
            assert decision.status == inp.prior


def the_active_value_is_written_only_when_everything_says_so(
    inp: DecisionInput, decision: Decision
) -> None:
    value = active_value(inp)
    if decision.write is not None and decision.write == value and value != 0:
        assert isinstance(inp.spec, ScheduledCapacitySpec)
        assert inp.spec.enabled and not inp.spec.kill_switch
        if inp.spec.node_name is not None:
            assert isinstance(inp.machines, tuple)
        assert decision.status.phase is Phase.ACTIVE
        held = decision.status.schedule
        assert held is not None and held.active is True


def check_invariants(inp: DecisionInput, decision: Decision, governed: frozenset[str]) -> None:
    only_zero_or_the_active_value_is_written(inp, decision)
    a_conflicted_object_never_gets_the_active_value(inp, decision, governed)
    ready_is_true_exactly_when_settled(decision)
    error_never_writes(decision)
    a_transient_error_changes_nothing(inp, decision)
    the_active_value_is_written_only_when_everything_says_so(inp, decision)


@examples(400)
@given(histories())
def test_every_decision_writes_only_safe_values_and_reports_ready_only_when_settled(
    history: list[tuple[DecisionInput, Decision]],
) -> None:
    """Only 0 or activeValue, never the active value to a conflicted object, Ready exactly
    when settled, Error never writes, a transient error changes nothing."""
    for inp, decision in history:
        check_invariants(inp, decision, observed_nodes(inp))


@examples(200)
@given(histories())
def test_a_world_that_stops_changing_reaches_a_status_that_stops_changing(
    history: list[tuple[DecisionInput, Decision]],
) -> None:
    inp, first = history[-1]
    second_input = replace(inp, prior=first.status, target=applied(inp.target, first.write))
    second = decide(second_input)
    assert second.write is None
    if first.write is None:
        assert second.status == first.status
    third = decide(replace(second_input, prior=second.status))
    assert third.write is None
    assert third.status == second.status
    assert third.events == ()
    assert status_patch(as_json(second.status), third.status) is None


@examples(150)
@given(histories())
def test_the_status_patch_turns_the_prior_into_the_desired_status(
    history: list[tuple[DecisionInput, Decision]],
) -> None:
    for inp, decision in history:
        prior = as_json(inp.prior) if inp.prior is not None else None
        patch = status_patch(prior, decision.status)
        if patch is None:
            assert prior == as_json(decision.status)
        else:
            patched = merge_patch({"status": prior or {}}, patch)
            assert patched == {"status": as_json(decision.status)}


# --- event sequences -------------------------------------------------------------------------------


@dataclass
class World:
    """The cluster as it really is; each step the controller observes it (sometimes failing)."""

    spec: dict[str, Any]
    schedule: ScheduleObservation = Resolved(True)
    machines: set[str] = field(default_factory=set)
    target_exists: bool = True
    value: object = 0
    counter: object = 0
    now: datetime = NOW
    generation: int = 1


events = st.one_of(
    st.tuples(st.just("schedule"), st.builds(Resolved, st.booleans())),
    st.tuples(st.just("schedule"), st.builds(Unresolved, st.sampled_from(list(UnresolvedReason)), st.just("x"))),
    st.tuples(st.just("machine_on"), st.sampled_from(NODES)),
    st.tuples(st.just("machine_off"), st.sampled_from(NODES)),
    st.tuples(st.just("counter"), counters),
    st.tuples(st.just("bump"), st.integers(0, 20)),
    st.tuples(st.just("target"), st.booleans()),
    st.tuples(st.just("advance"), st.integers(1, 3600)),
    st.tuples(st.just("toggle"), st.sampled_from(["enabled", "killSwitch"])),
    st.tuples(st.just("flaky"), st.sampled_from(["schedule", "target", "machines"])),
    st.tuples(st.just("quiet"), st.none()),
)


def step(world: World, event: tuple[str, Any]) -> str | None:
    """Apply one event to the world; returns which lookup fails this step, if any."""
    kind, arg = event
    if kind == "schedule":
        world.schedule = arg
    elif kind == "machine_on":
        world.machines.add(arg)
    elif kind == "machine_off":
        world.machines.discard(arg)
    elif kind == "counter":
        world.counter = arg
    elif kind == "bump":
        world.value = arg
    elif kind == "target":
        world.target_exists = arg
    elif kind == "advance":
        world.now += timedelta(seconds=arg)
    elif kind == "toggle":
        world.spec = {**world.spec, arg: not world.spec.get(arg, arg == "enabled")}
        world.generation += 1
    elif kind == "flaky":
        return str(arg)
    return None


def observe(world: World, failing: str | None, prior: ScheduledCapacityStatus | None) -> DecisionInput:
    target: TargetObservation = (
        TargetFound(world.value, world.counter) if world.target_exists else TargetNotFound()
    )
    machines: MachinesObservation = tuple(MachineNode(f"sm-{n}", n) for n in sorted(world.machines))
    return DecisionInput(
        namespace="tenant-a",
        name="agents-capacity",
        generation=world.generation,
        spec=parse_spec(world.spec),
        schedule=LookupFailed("503") if failing == "schedule" else world.schedule,
        target=LookupFailed("timeout") if failing == "target" else target,
        machines=LookupFailed("timeout") if failing == "machines" else machines,
        allowlist=ENTRY,
        prior=prior,
        now=world.now,
    )


@examples(200)
@given(st.sampled_from(VALID_SPECS), st.lists(events, max_size=30))
def test_no_sequence_of_events_gives_a_conflicted_host_the_active_value(
    spec: dict[str, Any], history: list[tuple[str, Any]]
) -> None:
    world = World(spec=spec)
    status: ScheduledCapacityStatus | None = None
    for event in history:
        failing = step(world, event)
        inp = observe(world, failing, status)
        decision = decide(inp)
        check_invariants(inp, decision, frozenset(world.machines))
        if decision.write is not None and world.target_exists:
            world.value = decision.write
        status = decision.status

    # Recovery is automatic: once the conflict and every override are gone, the schedule is
    # open and any repair back-off has run out (a field rewritten more than IMMEDIATE_REPAIRS
    # times is repaired again only after it, decision 0029), the next reconciles write the
    # active value and report Active.
    world.machines.clear()
    world.schedule = Resolved(True)
    world.target_exists = True
    world.spec = {**world.spec, "enabled": True, "killSwitch": False}
    world.now += contest.BACKOFF_CAP
    for _ in range(2):
        decision = decide(observe(world, None, status))
        if decision.write is not None:
            world.value = decision.write
        status = decision.status
    assert status is not None and status.phase is Phase.ACTIVE
    assert world.value == spec["capacity"]["activeValue"]


# --- one field, one governor ------------------------------------------------------------------------

FIELD_PATHS = ("spec.warmReplicas", "spec.pool", "spec.pool.size")
_ENTRY_WITH_POOL = ENTRY.model_copy(update={"capacity_paths": FIELD_PATHS})


@dataclass
class Governor:
    """One of the ScheduledCapacities naming the same target, as the controller sees it."""

    name: str
    spec: dict[str, Any]
    created: datetime
    schedule: ScheduleObservation
    status: ScheduledCapacityStatus | None = None
    alive: bool = True

    def claim(self) -> Claim:
        ref = self.spec["targetRef"]
        return Claim("tenant-a", self.name, ref["apiVersion"], ref["kind"], ref["name"],
                     self.spec["capacity"]["path"], self.created)


governor_events = st.one_of(
    st.tuples(st.just("schedule"), st.integers(0, 2), st.booleans()),
    st.tuples(st.just("bump"), st.integers(0, 2), st.integers(0, 20)),
    st.tuples(st.just("delete"), st.integers(0, 2), st.none()),
    st.tuples(st.just("reconcile"), st.integers(0, 2), st.none()),
)


@examples(300)
@given(
    st.lists(st.sampled_from(FIELD_PATHS), min_size=2, max_size=3),
    st.lists(st.integers(0, 3), min_size=3, max_size=3),
    st.lists(governor_events, max_size=25),
)
# The youngest governor's field rewritten by another writer six times: its repairs back off.
@example(["spec.warmReplicas", "spec.pool"], [0, 1, 2],
         [("schedule", 1, True), *[("bump", 1, 3)] * 6])
def test_with_several_governors_only_the_governor_writes_and_the_others_name_it(
    paths: list[str], ages: list[int], history: list[tuple[str, int, Any]]
) -> None:
    """Several ScheduledCapacities on one target (equal, prefix-related or unrelated paths,
    created in any order, some at the same second): whatever happens, a write comes only from an
    object that governs its field; every other one is Error naming an older governor; deleting
    a governor hands its field over on the next reconcile."""
    base = datetime(2026, 3, 1, tzinfo=UTC)
    governors = [
        Governor(f"cap-{i}", {**spec_dict(path, 7 + i, True, False, None, None)},
                 base + timedelta(seconds=ages[i]), Resolved(i % 2 == 0))
        for i, path in enumerate(paths)
    ]
    field: dict[str, object] = {}

    def reconcile(g: Governor, now: datetime = NOW) -> None:
        claims = [o.claim() for o in governors if o.alive]
        standing = standings(claims)[("tenant-a", g.name)]
        value = field.get(g.spec["capacity"]["path"], 0)
        inp = DecisionInput(
            namespace="tenant-a", name=g.name, generation=1, spec=parse_spec(g.spec),
            schedule=g.schedule, target=TargetFound(value, 0), machines=(),
            allowlist=_ENTRY_WITH_POOL, prior=g.status, now=now, field_standing=standing,
        )
        decision = decide(inp)
        check_invariants(inp, decision, frozenset())
        if isinstance(standing, GovernedBy):
            assert decision.write is None
            assert decision.status.phase is Phase.ERROR
            conflict = decision.status.condition(FIELD_GOVERNANCE_CONFLICT)
            assert conflict is not None and conflict.status is ConditionStatus.TRUE
            assert f"ScheduledCapacity {standing.governor.governor} governs" in conflict.message
            older = [o.claim() for o in governors if o.alive and o.name == standing.governor.name]
            assert older and precedence(older[0]) < precedence(g.claim())
        else:
            assert decision.status.phase is not Phase.ERROR
        if decision.write is not None:
            field[g.spec["capacity"]["path"]] = decision.write
        g.status = decision.status

    for kind, index, arg in history:
        g = governors[min(index, len(governors) - 1)]
        if not g.alive:
            continue
        if kind == "schedule":
            g.schedule = Resolved(arg)
        elif kind == "bump":
            field[g.spec["capacity"]["path"]] = arg
        elif kind == "delete":
            g.alive = False
        for each in governors:
            if each.alive:
                reconcile(each)

    # The handover: with every older overlapping governor deleted, the next reconcile of the
    # youngest governs and follows its own schedule.
    youngest = max((g for g in governors if g.alive), key=lambda g: precedence(g.claim()), default=None)
    if youngest is None:
        return
    for g in governors:
        if g is not youngest and overlaps(g.claim(), youngest.claim()):
            g.alive = False
    youngest.schedule = Resolved(True)
    # Later than any contest's backoff: bumps by another writer (the history's) may have made the
    # governor wait before its next repair (controllers.capacity.contest), which is not a refusal.
    later = NOW + contest.BACKOFF_CAP + timedelta(seconds=1)
    reconcile(youngest, later)
    reconcile(youngest, later)
    assert youngest.status is not None and youngest.status.phase is Phase.ACTIVE
    assert field[youngest.spec["capacity"]["path"]] == youngest.spec["capacity"]["activeValue"]
