"""`fivespot check` over a set of files: one field, one governor among the objects given.

The admission webhook denies a second ScheduledCapacity on a field by looking at the ones in the
cluster; the offline checker has no cluster, but it has every object it was given, so it applies
the same rule (`fivespot.api.fieldgovernance`) among them. Of the ScheduledCapacities that would be
admitted on their own and name overlapping fields of one target object (any version), the first
in the controller's order (oldest `creationTimestamp`, objects without one after, then the name)
governs; each of the others is denied with the webhook's message, naming the governor and the
file and line it was read from. In a cluster the first one applied would win instead: the point
is that the set cannot be applied as it is.

As at admission, an UPDATE (`--old`) that keeps its target and path is not denied — the webhook
lets it through so an object admitted while it was down stays editable — but it gets a warning
saying the controller makes it write nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Final

from msgspec import Struct
from msgspec.structs import replace

from fivespot.api.fieldgovernance import (
    CHECK,
    Claim,
    Governs,
    GovernedBy,
    OtherWriter,
    Standing,
    autoscaled_message,
    claim_of,
    denial,
    governed_by_message,
    manifest_warning,
    standing,
    standings,
    writer_of,
    written_by,
)
from fivespot.api.kinds.names import is_scheduled_capacity
from fivespot.compiler.diagnostics import Location
from fivespot.policies.admission_eval.result import Status, Verdict, Violation

_ALONE: Final = Governs()
POLICY: Final = "field-governance.5spot.finos.org"
"""The webhook that makes this decision in a cluster (its denials are prefixed with CHECK)."""


class Checked(Struct, frozen=True):
    """One object as `fivespot check` decided it, with what the rule needs besides the verdict:
    its claim and its old version's (`object_claim`; computed where the object was decided, so
    a forked worker sends back only these)."""

    claim: Claim | None
    old_claim: Claim | None
    verdict: Verdict
    where: Callable[[], Location]
    """Where the object's name is given; asked only of a governor a denial names (finding a
    field's position re-reads its document, which would double the cost of a clean run)."""
    writer: OtherWriter | None = None
    """What the object writes besides through a ScheduledCapacity (an autoscaler's target, a
    manifest's own fields: `fivespot.api.fieldgovernance.writer_of`)."""


def object_claim(obj: Mapping[str, Any] | None, namespace: str) -> Claim | None:
    """The fields a ScheduledCapacity claims (None for any other object, or no object)."""
    if obj is None or not is_scheduled_capacity(obj):
        return None
    return claim_of(obj, namespace)


def object_writer(obj: Mapping[str, Any] | None, namespace: str) -> OtherWriter | None:
    """The other writer an object is (`fivespot.api.fieldgovernance.writer_of`; None for a
    ScheduledCapacity, or no object)."""
    if obj is None or is_scheduled_capacity(obj):
        return None
    return writer_of(obj, namespace)


def _same_claim(a: Claim, b: Claim | None) -> bool:
    return b is not None and (a.key, a.path) == (b.key, b.path)


class _Standings:
    """The admitted claims grouped by target object, each group's standings decided once: claims
    on different objects never overlap, so a claim's standing depends only on its own group, and
    deciding every claim against every other would make `check` cubic in the number of objects."""

    def __init__(self, admitted: Sequence[Claim]) -> None:
        self._groups: dict[str, list[Claim]] = {}
        for claim in admitted:
            self._groups.setdefault(claim.key, []).append(claim)
        # A claim alone on its target object governs it: most groups, decided without sorting
        self._decided = {key: standings(group) if len(group) > 1
                         else {(group[0].namespace, group[0].name): _ALONE}
                         for key, group in self._groups.items()}
        self._names = Counter((c.key, c.namespace, c.name) for c in admitted)
        self._admitted = {id(c) for c in admitted}

    def of(self, claim: Claim) -> Standing:
        group = self._groups.get(claim.key, [])
        if id(claim) in self._admitted and self._names[(claim.key, claim.namespace, claim.name)] == 1:
            return self._decided[claim.key][(claim.namespace, claim.name)]
        # Not admitted itself, or its name given twice: decided as the given one, among its group.
        return standing(claim, group)


def _contested(checked: Sequence[Checked]) -> set[str]:
    """The targets on which some claim may be governed by another: those with an admitted claim
    of another ScheduledCapacity than one of their claims. Most targets have one claim, admitted,
    which governs; deciding only the rest keeps a clean check of many objects cheap."""
    first: dict[str, tuple[str, str]] = {}
    contested: set[str] = set()
    for item in checked:
        claim = item.claim
        if claim is not None and item.verdict.allowed:
            me = (claim.namespace, claim.name)
            if first.setdefault(claim.key, me) != me:
                contested.add(claim.key)
    for item in checked:
        claim = item.claim
        if claim is not None and not item.verdict.allowed:
            held = first.get(claim.key)
            if held is not None and held != (claim.namespace, claim.name):
                contested.add(claim.key)
    return contested


def field_governance(checked: Sequence[Checked]) -> list[Verdict]:
    """Each object's verdict with the field-governance rule applied among all of them."""
    contested = _contested(checked)
    verdicts = governed(checked, contested) if contested else [item.verdict for item in checked]
    return other_writers(checked, verdicts)


def other_writers(checked: Sequence[Checked], verdicts: list[Verdict]) -> list[Verdict]:
    """The verdicts with the writers fivespot does not run counted: a ScheduledCapacity on a
    field an autoscaler in the set writes is denied (as the webhook denies it); one on a field a
    manifest in the set sets gets a warning naming the manifest (a GitOps engine would put its
    value back)."""
    writers: dict[str, list[Checked]] = {}
    for item in checked:
        if item.writer is not None:
            writers.setdefault(item.writer.key, []).append(item)
    if not writers:
        return verdicts
    found = list(verdicts)
    for index, item in enumerate(checked):
        claim = item.claim
        if claim is None or claim.key not in writers:
            continue
        for other in writers[claim.key]:
            assert other.writer is not None
            path = written_by(claim, other.writer)
            if path is None:
                continue
            if not other.writer.autoscaler:
                found[index] = _manifest(found[index], claim, other, path)
            elif _same_claim(claim, item.old_claim):  # as at admission: an update keeping its
                found[index] = replace(found[index], warnings=(  # claim stays editable
                    *found[index].warnings, f"{autoscaled_message(claim, other.writer)}; this "
                    "object writes nothing while the autoscaler scales the field"))
            else:
                found[index] = _autoscaled(found[index], claim, other)
    return found


def _autoscaled(verdict: Verdict, claim: Claim, other: Checked) -> Verdict:
    assert other.writer is not None
    message = f"{autoscaled_message(claim, other.writer)}. {other.writer.describe()} is defined at {other.where()}"
    if not verdict.allowed:
        return replace(verdict, violations=(*verdict.violations, Violation(
            "webhook", POLICY, "spec.targetRef", message, reason="Forbidden")))
    return replace(verdict, allowed=False, status=Status(
        403, "Forbidden", f'admission webhook "{POLICY}" denied the request: {message}'),
        violations=(*verdict.violations, Violation("webhook", POLICY, "spec.targetRef", message,
                                                   reason="Forbidden")))


def _manifest(verdict: Verdict, claim: Claim, other: Checked, path: str) -> Verdict:
    assert other.writer is not None
    warning = f"{manifest_warning(claim, other.writer, path)}. It is defined at {other.where()}"
    return replace(verdict, warnings=(*verdict.warnings, warning))


def governed(checked: Sequence[Checked], targets: Collection[str]) -> list[Verdict]:
    """Each object's verdict with the rule applied among the claims on `targets` (keys); the
    others' verdicts as they are."""
    claims = [c.claim if c.claim is not None and c.claim.key in targets else None
              for c in checked]
    where = {id(c): item.where for c, item in zip(claims, checked) if c is not None}
    admitted = [c for c, item in zip(claims, checked) if c is not None and item.verdict.allowed]
    decided = _Standings(admitted)
    verdicts = []
    for claim, item in zip(claims, checked):
        found = decided.of(claim) if claim is not None else None
        if claim is None or not isinstance(found, GovernedBy):
            verdicts.append(item.verdict)
            continue
        governor = found.governor
        locate = where.get(id(governor))  # the governor's own object (its name may be given twice)
        read_from = locate() if locate is not None else None
        source = f". ScheduledCapacity {governor.governor} is defined at {read_from}" if read_from else ""
        if _same_claim(claim, item.old_claim):
            warning = f"{CHECK}: {governed_by_message(claim, governor).rstrip('.')}{source}"
            verdicts.append(replace(item.verdict, warnings=(*item.verdict.warnings, warning)))
            continue
        message = f"{denial(claim, [governor])}{source}"
        violation = Violation("webhook", POLICY, "spec.capacity.path", message, reason="Forbidden")
        # The API server calls webhooks after its policies: an object they deny already has the
        # answer it gets; one they admit gets the webhook's.
        status = item.verdict.status if not item.verdict.allowed else Status(
            403, "Forbidden", f'admission webhook "{POLICY}" denied the request: {message}')
        verdicts.append(replace(item.verdict, allowed=False, status=status,
                                violations=(*item.verdict.violations, violation)))
    return verdicts
