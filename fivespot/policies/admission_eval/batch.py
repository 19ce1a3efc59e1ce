"""The all-validations programs of every policy a request matches, and-ed into one evaluation.

Each policy already has an all-validations program (`Policy.all_pass`: its variables bound
eagerly, its validations and-ed): when it is true, the policy has no failure. For a request that
matches several policies, evaluating them one by one costs one activation per params object and
one evaluation per policy, and with cel-expr-python the fixed cost of each dominates. A batch
and-s them into one program, `(P1) && (P2) && cel.bind(params, fivespot_params_0, (P3))`, each
policy's params object bound to `params` around its own conjunct from a hidden variable, so that
one activation and one evaluation decide the common case: everything passes.

Exactness: CEL's `&&` is true only when every operand is true (a false or an error anywhere makes
it false or an error), so a true batch means every member's all-validations program is true, and
each member is skipped exactly when its own shortcut would have skipped it. Otherwise each
member's conjunct is evaluated alone against the same activation (already converted), which is
exactly its own shortcut; the members that are not true go on to the per-validation path.

Requests that show the members the same projection (what `projection` cuts their variables down
to) get the same answer: CEL is deterministic, so a projection already decided is looked up by
its `repr`, which tells apart every value JSON and YAML give (`1`, `1.0`, `-0.0`, `True` and
`'1'`; maps with their keys in the same order, as CEL iterates them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from msgspec import Struct, field

from fivespot.policies import memo
from fivespot.policies.admission_eval import projection
from fivespot.policies.cel import (
    ADMISSION_VARIABLES,
    Bound,
    CelCompileError,
    CelEvaluationError,
    Program,
    bind,
    compile_expression,
)

SLOT: Final = "fivespot_params_{}"
"""The hidden variable holding the params object of the batch's n-th member with params."""


class Entry(Struct, frozen=True):
    """A member: its position among the request's matched policies, its all-validations program
    and the one params object it is evaluated with (None for a policy without `paramKind`)."""

    position: int
    program: Program
    param: Mapping[str, Any] | None


class Batch(Struct, frozen=True, eq=False):
    program: Program
    reads: dict[str, projection.Paths]
    """What the members can observe of the request's variables (params excluded)."""
    slots: dict[str, Any]
    """Hidden variable -> the projected params object it holds."""
    covered: frozenset[int]
    """Positions of the members (decided together when the batch is true)."""
    members: tuple[tuple[int, Program], ...]
    """Each member's position and its conjunct alone (same variables as the batch)."""
    seen: dict[str, frozenset[int]] = field(default_factory=dict)
    """What `passed` gave for each projection already decided, by its `repr`."""

    def passed(self, projected: Callable[[Mapping[str, projection.Paths]], dict[str, Any]]
               ) -> frozenset[int]:
        """The positions of the members whose all-validations program is true; `projected(reads)`
        gives the request's variables cut down to `reads` (`params` is set here: None outside
        the members' own bindings)."""
        data = projected(self.reads)
        key = repr(data)
        found = self.seen.get(key)
        if found is None:
            found = self._decide(data)
            if len(key) <= MAX_SEEN_KEY:
                memo.remember(self.seen, key, found)
        return found

    def _decide(self, data: dict[str, Any]) -> frozenset[int]:
        data["params"] = None
        data.update(self.slots)
        bound = bind(self.program.variables, data)
        if _true(self.program, bound):
            return self.covered
        return frozenset(position for position, member in self.members if _true(member, bound))


MAX_SEEN_KEY: Final = 4096
"""The longest projection `repr` remembered: a policy that reads large parts of an object is
evaluated every time."""


def _true(program: Program, bound: Bound) -> bool:
    try:
        return program.evaluate_bound(bound) is True
    except CelEvaluationError:
        return False


def build(entries: Sequence[Entry]) -> Batch | None:
    """The batch of `entries`, or None when there are fewer than two (a member's own shortcut
    is as cheap) or the and-ed program does not compile."""
    if len(entries) < 2:
        return None
    conjuncts: list[str] = []
    positions: list[int] = []
    reads: dict[str, projection.Paths] = {}
    slots: dict[str, Any] = {}
    for entry in entries:
        conjunct = f"({entry.program.expression})"
        observed = projection.reads(entry.program.tree.root, ADMISSION_VARIABLES)
        if entry.param is not None:
            slot = SLOT.format(len(slots))
            slots[slot] = (projection.project(entry.param, observed.pop("params"))
                           if "params" in observed else None)
            conjunct = f"cel.bind(params, {slot}, {conjunct})"
        conjuncts.append(conjunct)
        positions.append(entry.position)
        projection.merge(reads, observed)
    variables = ADMISSION_VARIABLES | frozenset(slots)
    try:
        program = compile_expression(" && ".join(conjuncts), variables)
        members = tuple((position, compile_expression(conjunct, variables))
                        for position, conjunct in zip(positions, conjuncts))
    except CelCompileError:
        return None
    return Batch(program, reads, slots, frozenset(positions), members)
