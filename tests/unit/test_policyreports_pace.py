"""How soon a namespace's PolicyReport may be rebuilt again
(`fivespot.controllers.policyreports.controller.rebuild_wait`, decision 0046): at once after a quiet
spell, and otherwise not before REBUILD_EVERY_S has passed since the last rebuild, so a burst of
creates is judged in a few rebuilds of the whole namespace rather than one per create."""

from __future__ import annotations

import pytest

from fivespot.controllers.policyreports.controller import REBUILD_EVERY_S, rebuild_wait

pytestmark = pytest.mark.unit


def test_a_namespace_never_rebuilt_is_rebuilt_at_once() -> None:
    assert rebuild_wait(None, 1000.0) == 0.0


def test_a_change_soon_after_a_rebuild_waits_for_the_rest_of_the_interval() -> None:
    assert rebuild_wait(1000.0, 1001.5) == pytest.approx(REBUILD_EVERY_S - 1.5)
    assert rebuild_wait(1000.0, 1000.0) == REBUILD_EVERY_S


def test_a_change_once_the_interval_has_passed_is_rebuilt_at_once() -> None:
    assert rebuild_wait(1000.0, 1000.0 + REBUILD_EVERY_S) == 0.0
    assert rebuild_wait(1000.0, 5000.0) == 0.0


def test_the_interval_is_within_half_the_bound_a_report_follows_a_change_in() -> None:
    """docs/design/numbers.md: a report follows a change within 10 s; a change that just misses
    one rebuild is in the next, REBUILD_EVERY_S later."""
    assert 0 < REBUILD_EVERY_S <= 10.0 / 2
    assert rebuild_wait(0.0, 0.0, every_s=2.0) == 2.0
