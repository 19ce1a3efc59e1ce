"""ManualSchedule: spec.enabled is published as status.active, with no calendar and no requeue."""

from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError

from fivespot.api.kinds.providers import ManualScheduleSpec
from fivespot.controllers.spotschedules import manual
from tests.unit.controllers.spotschedules.test_status import apply

NOW = dt.datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=dt.timezone.utc)
LATER = NOW + dt.timedelta(hours=3)


@pytest.mark.parametrize("enabled", [True, False])
def test_active_follows_enabled_and_never_transitions(enabled: bool) -> None:
    spec = ManualScheduleSpec(enabled=enabled)
    assert manual.is_active(spec, NOW) is enabled
    assert manual.next_transition(spec, NOW) is None


def test_enabled_is_required() -> None:
    with pytest.raises(ValidationError, match="enabled"):
        ManualScheduleSpec.model_validate({})


@pytest.mark.parametrize("value", ["maybe", "true", 1, None])
def test_enabled_must_be_a_json_boolean_as_the_api_server_requires(value: object) -> None:
    with pytest.raises(ValidationError, match="enabled"):
        ManualScheduleSpec.model_validate({"enabled": value})


def test_first_publish_matches_the_provider_contract_example() -> None:
    patch, requeue = manual.evaluate({"enabled": True}, 4, None, NOW)
    assert requeue is None
    assert patch == {
        "status": {
            "active": True,
            "observedGeneration": 4,
            "lastTransitionTime": "2026-11-30T12:00:00Z",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Reconciled",
                    "message": "manual toggle applied",
                    "lastTransitionTime": "2026-11-30T12:00:00Z",
                }
            ],
        }
    }


def test_unchanged_toggle_writes_nothing() -> None:
    patch, _ = manual.evaluate({"enabled": True}, 4, None, NOW)
    stored = apply(None, patch)
    assert manual.evaluate({"enabled": True}, 4, stored, LATER) == (None, None)


def test_flipping_the_toggle_moves_last_transition_time_but_not_ready() -> None:
    stored = apply(None, manual.evaluate({"enabled": True}, 4, None, NOW)[0])
    patch, _ = manual.evaluate({"enabled": False}, 5, stored, LATER)
    assert patch is not None
    status = patch["status"]
    assert status["active"] is False and status["observedGeneration"] == 5
    assert status["lastTransitionTime"] == "2026-11-30T15:00:00Z"
    assert status["conditions"][0]["lastTransitionTime"] == "2026-11-30T12:00:00Z"


def test_new_generation_with_same_value_only_bumps_observed_generation() -> None:
    stored = apply(None, manual.evaluate({"enabled": True}, 4, None, NOW)[0])
    patch, _ = manual.evaluate({"enabled": True}, 6, stored, LATER)
    assert patch is not None
    assert apply(stored, patch) == {**(stored or {}), "observedGeneration": 6}


def test_invalid_spec_is_reported_as_not_ready_and_holds_active() -> None:
    stored = apply(None, manual.evaluate({"enabled": True}, 4, None, NOW)[0])
    patch, requeue = manual.evaluate({"enabled": True, "enable": False}, 5, stored, LATER)
    assert requeue is None and patch is not None
    status = patch["status"]
    assert status["active"] is True
    assert status["lastTransitionTime"] == "2026-11-30T12:00:00Z"
    ready, stalled = status["conditions"]  # Stalled=True beside Ready=False (kstatus)
    assert (stalled["type"], stalled["status"]) == ("Stalled", "True")
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert "spec.enable: Extra inputs are not permitted" in ready["message"]
    assert ready["lastTransitionTime"] == "2026-11-30T15:00:00Z"


def test_missing_spec_is_reported_not_raised() -> None:
    patch, _ = manual.evaluate(None, 1, None, NOW)
    assert patch is not None
    ready, stalled = patch["status"]["conditions"]  # Stalled=True beside Ready=False (kstatus)
    assert (stalled["type"], stalled["status"]) == ("Stalled", "True")
    assert ready["status"] == "False" and ready["message"].endswith(
        "spec: Input should be a valid dictionary or instance of ManualScheduleSpec"
    )
    assert patch["status"]["active"] is False
