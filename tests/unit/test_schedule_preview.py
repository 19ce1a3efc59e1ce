"""`fivespot schedule preview`: golden output for the bundled example (its compiled NYSE calendar
and the tenant's office-hours / override / freeze composite), and the preview's transitions are
the providers' own decisions: each printed instant is where the kind's `is_active` flips, and
nothing flips in between."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fivespot.api.kinds.providers import CapitalMarketsScheduleSpec, TimeBasedSpotScheduleSpec
from fivespot.controllers.spotschedules import capital_markets, composite, time_based
from fivespot.controllers.spotschedules.timeline import Provider, timelines
from fivespot.cli.main import main

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent-sandbox"
GOLDEN = Path(__file__).parent / "golden" / "preview"
ARGS = [str(EXAMPLE / "tenant"), "--config", str(EXAMPLE / "config"),
        "--from", "2026-03-27T12:00:00Z", "--count", "6"]
UTC = dt.timezone.utc
SECOND = dt.timedelta(seconds=1)


def _run(capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert main(["schedule", "preview", *ARGS, *extra]) == 0
    return capsys.readouterr().out.replace(str(ROOT) + "/", "")


@pytest.mark.parametrize(("output", "file"), [("table", "agent-sandbox.txt"), ("json", "agent-sandbox.json")])
def test_the_bundled_examples_preview_is_the_golden_one(
        capsys: pytest.CaptureFixture[str], output: str, file: str) -> None:
    printed = _run(capsys, "--output", output)
    if os.environ.get("FIVESPOT_UPDATE_GOLDEN"):
        GOLDEN.mkdir(exist_ok=True)
        (GOLDEN / file).write_text(printed)
    assert printed == (GOLDEN / file).read_text()


def test_each_transition_is_where_the_providers_own_decision_flips(capsys: pytest.CaptureFixture[str]) -> None:
    report = json.loads(_run(capsys, "--output", "json"))
    specs: dict[str, Any] = {}
    for schedule in report["schedules"]:
        specs[schedule["name"]] = schedule
    import yaml

    objects = {d["metadata"]["name"]: d for d in yaml.safe_load_all((EXAMPLE / "tenant" / "desk.yaml").read_text())}
    office = TimeBasedSpotScheduleSpec.model_validate(objects["office-hours"]["spec"])
    nyse_spec = CapitalMarketsScheduleSpec.model_validate(
        yaml.safe_load((ROOT / "tests/unit/golden/agent-sandbox/schedules/agents/nyse.capitalmarketsschedule.yaml")
                       .read_text())["spec"])
    deciders: dict[str, Callable[[dt.datetime], bool]] = {"office-hours": lambda t: time_based.is_active(office, t),
                "nyse": lambda t: capital_markets.is_active(nyse_spec, t),
                # desk = (office or override) and not freeze, with override and freeze off
                "desk": lambda t: time_based.is_active(office, t)}
    for name, active_at in deciders.items():
        rows = specs[name]["transitions"]
        assert len(rows) == 6, name
        previous = dt.datetime.fromisoformat(report["from"].replace("Z", "+00:00"))
        state = active_at(previous)
        assert specs[name]["now"]["state"] == ("active" if state else "inactive")
        for row in rows:
            at = dt.datetime.fromisoformat(row["at"].replace("Z", "+00:00"))
            assert active_at(at - SECOND) is state and active_at(at) is not state, (name, at)
            # nothing flips in between: the provider's own next transition is this instant
            state = not state
            assert row["state"] == ("active" if state else "inactive")
            previous = at
    desk_writes = [w["value"] for row in specs["desk"]["transitions"] for w in row["writes"]]
    assert desk_writes == [0, 4, 0, 4, 0, 4]


def test_a_composite_timeline_is_its_expression_over_the_childrens() -> None:
    start = dt.datetime(2026, 3, 2, 0, tzinfo=UTC)  # a Monday
    providers = [
        Provider("TimeBasedSpotSchedule", "t", "office",
                 {"daysOfWeek": ["mon-fri"], "hoursOfDay": ["9-16"], "timezone": "UTC"}),
        Provider("TimeBasedSpotSchedule", "t", "lunch",
                 {"daysOfWeek": ["mon-sun"], "hoursOfDay": ["12"], "timezone": "UTC"}),
        Provider("CompositeSchedule", "t", "desk", {"allOf": [
            {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "TimeBasedSpotSchedule", "name": "office"},
            {"not": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "TimeBasedSpotSchedule",
                     "name": "lunch"}}]}),
    ]
    found = timelines(providers, start, count=4)
    desk = found[("t", "spotschedules.5spot.finos.org", "CompositeSchedule", "desk")]
    assert desk.initial is False
    assert [(w.hour, v) for w, v in desk.transitions] == [(9, True), (12, False), (13, True), (17, False)]
    parsed = composite.parse_spec(providers[2].spec)
    assert not isinstance(parsed, Exception)


def test_a_missing_child_is_unresolved_and_a_cycle_is_reported() -> None:
    start = dt.datetime(2026, 3, 2, tzinfo=UTC)
    ref = {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "CompositeSchedule"}
    found = timelines([
        Provider("CompositeSchedule", "t", "lonely", {"not": {**ref, "kind": "ManualSchedule", "name": "gone"}}),
        Provider("CompositeSchedule", "t", "a", {"not": {**ref, "name": "b"}}),
        Provider("CompositeSchedule", "t", "b", {"not": {**ref, "name": "a"}}),
    ], start)
    assert found[("t", "spotschedules.5spot.finos.org", "CompositeSchedule", "lonely")].initial is None
    cycle = found[("t", "spotschedules.5spot.finos.org", "CompositeSchedule", "a")]
    assert cycle.problem is not None and "is a cycle" in cycle.problem


def test_bad_input_is_a_located_diagnostic_not_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: 5spot.finos.org/v1alpha1\nkind: ScheduledCapacity\n"
                   "metadata: {name: x}\nspec:\n  schedule: {kind: ManualSchedule}\n")
    assert main(["schedule", "preview", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:5:3: spec.schedule.apiVersion: Field required" in err and "Traceback" not in err
    assert main(["schedule", "preview", str(tmp_path / "none.yaml")]) == 2
    assert "cannot read: no such file" in capsys.readouterr().err
