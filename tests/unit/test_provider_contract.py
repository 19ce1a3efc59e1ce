"""The provider contract as every consumer reads it (fivespot/api/provider_contract.py): only the status,
a bool `active`, a Ready condition that is True if present; and the runtime reader's answers
while a kind is not installed or not yet resolved."""

from __future__ import annotations

from typing import Any

import pytest

from fivespot.api.provider_contract import LookupFailed, Resolved, Unresolved, UnresolvedReason, observe_schedule
from fivespot.runtime.kindwatches import NOT_SERVED, KindWatches, Watched
from fivespot.runtime.schedules import read_schedule

pytestmark = pytest.mark.unit


def _provider(status: dict[str, Any] | None) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "desk"}, "spec": {"enabled": True}}
    if status is not None:
        obj["status"] = status
    return obj


@pytest.mark.parametrize(
    ("provider", "crd", "expected"),
    [
        (_provider({"active": True}), True, Resolved(True)),
        (_provider({"active": False, "conditions": [{"type": "Ready", "status": "True"}]}), True, Resolved(False)),
        (_provider({"active": True, "conditions": [{"type": "Ready", "status": "False"}]}), True,
         UnresolvedReason.NOT_READY),
        (_provider({"active": True, "conditions": [{"type": "Ready", "status": "Unknown"}]}), True,
         UnresolvedReason.NOT_READY),
        (_provider({"active": "true"}), True, UnresolvedReason.ACTIVE_NOT_BOOL),
        (_provider({}), True, UnresolvedReason.ACTIVE_MISSING),
        (_provider(None), True, UnresolvedReason.ACTIVE_MISSING),
        (None, True, UnresolvedReason.NOT_FOUND),
        (None, False, UnresolvedReason.CRD_NOT_INSTALLED),
    ],
    ids=["active", "inactive-and-ready", "ready-false", "ready-unknown", "active-not-bool",
         "active-missing", "no-status", "object-missing", "crd-missing"],
)
def test_a_reference_resolves_only_on_a_boolean_active_and_a_true_or_absent_ready(
    provider: dict[str, Any] | None, crd: bool, expected: Resolved | UnresolvedReason
) -> None:
    observed = observe_schedule(provider, crd_installed=crd)
    if isinstance(expected, Resolved):
        assert observed == expected
    else:
        assert isinstance(observed, Unresolved) and observed.reason is expected


def test_the_provider_spec_is_never_read() -> None:
    provider = _provider({"active": False})
    provider["spec"] = {"enabled": True, "active": True}
    assert observe_schedule(provider) == Resolved(False)


def test_the_missing_object_message_names_the_consumers_field() -> None:
    observed = observe_schedule(None, reference="spec.anyOf[1]")
    assert isinstance(observed, Unresolved) and "fix spec.anyOf[1]" in observed.message


class _Informer:
    def __init__(self, objects: dict[tuple[str, str], dict[str, Any]], synced: bool = True):
        self.objects, self.synced = objects, synced

    def has_synced(self) -> bool:
        return self.synced

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((namespace, name))


def _watches(watched: Watched | None) -> KindWatches:
    watches = KindWatches(None, lambda resolved: None, lambda *args: None)  # type: ignore[arg-type, return-value]
    if watched is not None:
        watches._kinds[(watched.group, watched.kind)] = watched
    return watches


GROUP = "spotschedules.5spot.finos.org"


def test_a_kind_not_yet_resolved_is_a_failed_lookup_not_an_absence() -> None:
    observed = read_schedule(_watches(None), "team", GROUP, "ManualSchedule", "desk")
    assert isinstance(observed, LookupFailed) and "pending" in observed.message


def test_a_kind_the_api_server_does_not_serve_is_unresolved_crd_not_installed() -> None:
    watched = Watched(GROUP, "ManualSchedule", last_error=NOT_SERVED)
    observed = read_schedule(_watches(watched), "team", GROUP, "ManualSchedule", "desk")
    assert isinstance(observed, Unresolved) and observed.reason is UnresolvedReason.CRD_NOT_INSTALLED


def test_an_unsynced_cache_is_a_failed_lookup_and_a_synced_one_applies_the_contract() -> None:
    desk = {"metadata": {"name": "desk"}, "status": {"active": True}}
    watched = Watched(GROUP, "ManualSchedule", informer=_Informer({}, synced=False))  # type: ignore[arg-type]
    assert isinstance(read_schedule(_watches(watched), "team", GROUP, "ManualSchedule", "desk"), LookupFailed)
    watched.informer = _Informer({("team", "desk"): desk})  # type: ignore[assignment]
    assert read_schedule(_watches(watched), "team", GROUP, "ManualSchedule", "desk") == Resolved(True)
    missing = read_schedule(_watches(watched), "team", GROUP, "ManualSchedule", "gone", reference="spec.not")
    assert isinstance(missing, Unresolved) and missing.reason is UnresolvedReason.NOT_FOUND
