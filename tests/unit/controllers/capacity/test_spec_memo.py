"""`SpecMemo`: a ScheduledCapacity's spec is parsed once per (uid, generation), not on every
reconcile, and never served for another generation or another object of the same name."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fivespot.api.kinds.scheduled_capacity import ScheduledCapacitySpec
from fivespot.controllers.capacity.observations import InvalidSpec, SpecMemo
from tests.unit.controllers.capacity.test_models import SEED_EXAMPLE

pytestmark = pytest.mark.unit


def scap(uid: str | None, generation: Any, active: int = 10) -> dict[str, Any]:
    spec: dict[str, Any] = copy.deepcopy(SEED_EXAMPLE)
    spec["capacity"] = {**spec["capacity"], "activeValue": active}
    meta: dict[str, Any] = {"name": "desk", "namespace": "trading"}
    if uid is not None:
        meta["uid"] = uid
    if generation is not None:
        meta["generation"] = generation
    return {"metadata": meta, "spec": spec}


def active_value(spec: ScheduledCapacitySpec | InvalidSpec) -> int:
    assert isinstance(spec, ScheduledCapacitySpec)
    return spec.capacity.active_value


def test_the_same_uid_and_generation_is_parsed_once() -> None:
    memo = SpecMemo()
    first = memo.parse("trading/desk", scap("u1", 3))
    assert memo.parse("trading/desk", scap("u1", 3)) is first


def test_a_new_generation_is_parsed_again() -> None:
    memo = SpecMemo()
    assert active_value(memo.parse("trading/desk", scap("u1", 3, active=10))) == 10
    assert active_value(memo.parse("trading/desk", scap("u1", 4, active=7))) == 7


def test_an_object_recreated_under_the_same_name_is_parsed_again() -> None:
    memo = SpecMemo()
    assert active_value(memo.parse("trading/desk", scap("u1", 1, active=10))) == 10
    assert active_value(memo.parse("trading/desk", scap("u2", 1, active=7))) == 7


def test_a_forgotten_object_is_parsed_again() -> None:
    memo = SpecMemo()
    first = memo.parse("trading/desk", scap("u1", 1))
    memo.forget("trading/desk")
    assert memo.parse("trading/desk", scap("u1", 1)) is not first


@pytest.mark.parametrize("uid, generation", [(None, 1), ("u1", None), ("", 1), ("u1", 0),
                                             ("u1", "1"), ("u1", True)])
def test_an_object_without_a_uid_or_generation_is_parsed_every_time(uid: str | None,
                                                                    generation: Any) -> None:
    memo = SpecMemo()
    assert active_value(memo.parse("trading/desk", scap(uid, generation, active=10))) == 10
    assert active_value(memo.parse("trading/desk", scap(uid, generation, active=7))) == 7


def test_an_invalid_spec_is_kept_as_invalid_for_its_generation() -> None:
    memo = SpecMemo()
    bad = {"metadata": {"uid": "u1", "generation": 2}, "spec": {"schedule": 3}}
    found = memo.parse("trading/desk", bad)
    assert isinstance(found, InvalidSpec) and found.errors
    assert memo.parse("trading/desk", bad) is found


def with_status(uid: str | None, version: str | None, phase: str) -> dict[str, Any]:
    obj = scap(uid, 1)
    if version is not None:
        obj["metadata"]["resourceVersion"] = version
    obj["status"] = {"phase": phase}
    return obj


def test_the_same_uid_and_resource_version_parses_its_status_once() -> None:
    memo = SpecMemo()
    first = memo.status("trading/desk", with_status("u1", "41", "Active"))
    assert first is not None and first.phase.value == "Active"
    assert memo.status("trading/desk", with_status("u1", "41", "Active")) is first


def test_a_new_resource_version_parses_its_status_again() -> None:
    memo = SpecMemo()
    memo.status("trading/desk", with_status("u1", "41", "Active"))
    found = memo.status("trading/desk", with_status("u1", "42", "HandingBack"))
    assert found is not None and found.phase.value == "HandingBack"


def test_a_recreated_or_forgotten_object_parses_its_status_again() -> None:
    memo = SpecMemo()
    first = memo.status("trading/desk", with_status("u1", "41", "Active"))
    recreated = memo.status("trading/desk", with_status("u2", "41", "Inactive"))
    assert recreated is not None and recreated.phase.value == "Inactive"
    memo.forget("trading/desk")
    assert memo.status("trading/desk", with_status("u1", "41", "Active")) is not first


@pytest.mark.parametrize("uid, version", [(None, "41"), ("u1", None), ("", "41"), ("u1", "")])
def test_an_object_without_a_uid_or_resource_version_parses_its_status_every_time(
        uid: str | None, version: str | None) -> None:
    memo = SpecMemo()
    first = memo.status("trading/desk", with_status(uid, version, "Active"))
    assert memo.status("trading/desk", with_status(uid, version, "Active")) is not first


def test_an_absent_or_unreadable_status_is_none() -> None:
    memo = SpecMemo()
    obj = scap("u1", 1)
    obj["metadata"]["resourceVersion"] = "41"
    assert memo.status("trading/desk", obj) is None
    obj["status"] = {"phase": "NoSuchPhase"}
    obj["metadata"]["resourceVersion"] = "42"
    assert memo.status("trading/desk", obj) is None
