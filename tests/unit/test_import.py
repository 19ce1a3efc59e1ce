"""`fivespot import` (fivespot/compiler/importer.py, fivespot/cli/importer.py) on each peer's documented
examples, on every form of docs/reference/schedules-from-other-tools.md, and as a user runs it.

Where each example comes from is said beside it: kube-green v0.7.1's README and testdata (its Go
module, the one tools/peers/versions pins), GoKubeDownscaler v1.3.4's website guides and scope
pages (its Go module), and KEDA's cron scaler page (keda.sh/docs/2.17/scalers/cron/ and
keda.sh/docs/1.5/scalers/cron).
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fivespot.api.kinds.providers import TimeBasedSpotScheduleSpec
from fivespot.compiler.diagnostics import InputError
from fivespot.compiler.importer import Imported, import_objects, render
from fivespot.compiler.check.objectyaml import read_text
from fivespot.controllers.spotschedules import time_based as tb
from tests.unit.test_schedules_from_other_tools import ROWS

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
UTC = dt.timezone.utc


def _import(text: str, **options: Any) -> Imported:
    return import_objects(read_text(text, "peer.yaml"), **options)


def _deployment(name: str, namespace: str, replicas: int = 2, **meta: Any) -> str:
    return yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment",
                           "metadata": {"name": name, "namespace": namespace, **meta},
                           "spec": {"replicas": replicas}})


def _spec(imported: Imported, name: str) -> TimeBasedSpotScheduleSpec:
    (schedule,) = [s for s in imported.schedules if s.name == name]
    return TimeBasedSpotScheduleSpec.model_validate(schedule.spec)


def _at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


# --- kube-green: README.md and testdata/ of github.com/kube-green/kube-green@v0.7.1 ----------------

KUBE_GREEN_README_WORKING_HOURS = """\
apiVersion: kube-green.com/v1alpha1
kind: SleepInfo
metadata:
  name: working-hours
  namespace: shop
spec:
  weekdays: "1-5"
  sleepAt: "20:00"
  wakeUpAt: "08:00"
  timeZone: "Europe/Rome"
  suspendCronJobs: true
  excludeRef:
    - apiVersion: "apps/v1"
      kind:       Deployment
      name:       api-gateway
"""
"""kube-green README.md, "CRD Examples": "Pods running during working hours with Europe/Rome
timezone, suspend CronJobs and exclude a deployment named `api-gateway`"."""

KUBE_GREEN_README_NO_WAKEUP = """\
apiVersion: kube-green.com/v1alpha1
kind: SleepInfo
metadata:
  name: working-hours-no-wakeup
  namespace: shop
spec:
  sleepAt: "20:00"
  timeZone: Europe/Rome
  weekdays: "*"
"""
"""kube-green README.md, "Pods sleep every night without restore"."""


def test_kube_green_readme_working_hours_sleeps_every_deployment_but_the_excluded_one() -> None:
    imported = _import("---\n".join([KUBE_GREEN_README_WORKING_HOURS, _deployment("web", "shop", 3),
                                     _deployment("api-gateway", "shop", 2)]))
    assert [(c.target, c.value, c.schedule) for c in imported.capacities] == [
        ("web", 3, "kube-green-working-hours")]
    spec = _spec(imported, "kube-green-working-hours")
    assert spec.timezone == "Europe/Rome"
    assert tb.is_active(spec, _at("2026-12-07T08:00:00+01:00"))          # Monday, at wakeUpAt
    assert not tb.is_active(spec, _at("2026-12-07T07:59:00+01:00"))
    assert not tb.is_active(spec, _at("2026-12-07T20:00:00+01:00"))      # at sleepAt
    assert not tb.is_active(spec, _at("2026-12-12T12:00:00+01:00"))      # Saturday
    messages = [f"{n.field}: {n.message}" for n in imported.notes]
    assert any(m.startswith("spec.suspendCronJobs: CronJobs are not suspended") for m in messages)
    assert any("--sleep-delta" in m for m in messages)


def test_kube_green_readme_sleep_without_wake_is_never_open_and_says_how_to_wake() -> None:
    imported = _import(KUBE_GREEN_README_NO_WAKEUP + "---\n" + _deployment("web", "shop"))
    spec = _spec(imported, "kube-green-working-hours-no-wakeup")
    assert tb.next_transition(spec, _at("2026-12-07T00:00:00+00:00")) is None
    assert not tb.is_active(spec, _at("2026-12-07T12:00:00+00:00"))
    (note,) = [n for n in imported.notes if n.field == "spec.wakeUpAt"]
    assert "schedule override timebasedspotschedule/kube-green-working-hours-no-wakeup --on --until 20:00" \
        in note.message
    assert (note.where.file, note.where.line) == ("peer.yaml", 6)  # spec: (wakeUpAt is absent)


def test_kube_green_testdata_patches_carry_the_replicas_patch_and_report_the_cronjob_one() -> None:
    source = Path(__file__).parent / "testdata" / "import" / "kube-green-working-hours.yml"
    documents = read_text(source.read_text(), "working-hours.yml")
    imported = import_objects([*documents, *read_text(_deployment("web", "default"), "d.yaml")])
    assert [c.target for c in imported.capacities] == ["web"]
    patches = [n for n in imported.notes if n.field == "spec.patches"]
    assert len(patches) == 1 and "patch 1 on CronJob.batch" in patches[0].message


def test_kube_green_workloads_owned_by_a_controller_are_left_out_as_it_leaves_them() -> None:
    owned = _deployment("child", "shop", ownerReferences=[
        {"apiVersion": "x/v1", "kind": "Operator", "name": "o", "uid": "u", "controller": True}])
    imported = _import(KUBE_GREEN_README_WORKING_HOURS + "---\n" + owned)
    assert imported.capacities == []
    assert any("owned by a controller" in n.message for n in imported.notes)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("weekdays", '"8"', "'8' is not a number from 0 to 7"),
    ("sleepAt", '"25:00"', "'25' is not a number from 0 to 23"),
    ("timeZone", "Mars/Olympus", "is not an IANA time zone"),
])
def test_a_sleepinfo_kube_green_would_refuse_is_an_error_naming_file_line_and_field(
        field: str, value: str, message: str) -> None:
    text = KUBE_GREEN_README_WORKING_HOURS.replace(
        next(line for line in KUBE_GREEN_README_WORKING_HOURS.splitlines()
             if line.strip().startswith(field + ":")), f"  {field}: {value}")
    with pytest.raises(InputError) as caught:
        _import(text)
    (diagnostic,) = caught.value.diagnostics
    line = next(i for i, l in enumerate(text.splitlines(), 1) if l.strip().startswith(field + ":"))
    assert str(diagnostic).startswith(f"peer.yaml:{line}:3: spec.{field}: ")
    assert message in diagnostic.message


# --- GoKubeDownscaler: website/ of github.com/caas-team/gokubedownscaler@v1.3.4 ------------------

def _namespace(name: str, **annotations: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": name, "annotations": {
                               f"downscaler/{k.replace('_', '-')}": v for k, v in annotations.items()}}})


NIGHT_TIME = "Mon-Fri 18:00-08:00 UTC, Sat-Sun 00:00-24:00 UTC"
"""guides/0 - getting-started/1 - Basic Night Time Saving.mdx, "Namespace Level" and "Workload
Level": `downscaler/downtime: "Mon-Fri 18:00-08:00 UTC, Sat-Sun 00:00-24:00 UTC"`."""


def test_gokubedownscaler_night_time_saving_on_a_namespace_is_down_nights_and_weekends() -> None:
    imported = _import(_namespace("my-namespace", downtime=NIGHT_TIME) + "---\n"
                       + _deployment("api", "my-namespace", 4))
    assert [(c.target, c.value, c.schedule) for c in imported.capacities] == [("api", 4, "downscaler")]
    spec = _spec(imported, "downscaler")
    for instant, up in [("2026-12-07T08:00:00Z", True), ("2026-12-07T17:59:00Z", True),
                        ("2026-12-07T18:00:00Z", False), ("2026-12-08T07:59:00Z", False),
                        ("2026-12-12T12:00:00Z", False), ("2026-12-14T08:00:00Z", True)]:
        assert tb.is_active(spec, _at(instant)) is up, instant


def test_gokubedownscaler_workload_scope_uptime_wins_over_the_namespaces_downtime() -> None:
    """docs/2 - downscaler/0 - scopes/4 - Workload Scope.mdx: `downscaler/uptime: "Mon-Fri
    08:00-20:00 UTC"` on a Deployment; the schedule values are one group, taken from the most
    specific scope that sets any (1 - configurations/1 - Values.mdx, "Value Groups")."""
    workload = yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
        "name": "example-deployment", "namespace": "ns",
        "annotations": {"downscaler/uptime": "Mon-Fri 08:00-20:00 UTC"}}, "spec": {"replicas": 2}})
    imported = _import("---\n".join([_namespace("ns", downtime=NIGHT_TIME), workload,
                                     _deployment("other", "ns", 1)]))
    assert [(c.target, c.schedule) for c in imported.capacities] == [
        ("example-deployment", "downscaler-example-deployment"), ("other", "downscaler")]
    spec = _spec(imported, "downscaler-example-deployment")
    assert tb.is_active(spec, _at("2026-12-07T19:00:00Z"))
    assert not tb.is_active(spec, _at("2026-12-07T20:00:00Z"))


def test_gokubedownscaler_namespace_scope_example_resting_at_one_replica_is_reported_not_imported() -> None:
    """docs/2 - downscaler/0 - scopes/3 - Namespace Scope.mdx: `downscaler/downscale-replicas:
    "1"` and `downscaler/exclude: "false"` (with a downtime, so there is something to scale)."""
    imported = _import(_namespace("example-namespace", downtime=NIGHT_TIME, downscale_replicas="1",
                                  exclude="false") + "---\n" + _deployment("api", "example-namespace"))
    assert imported.capacities == []
    (note,) = [n for n in imported.notes if n.field.endswith("downscale-replicas")]
    assert "rests at 1 replicas; a fivespot schedule rests at 0" in note.message


def test_gokubedownscaler_exclude_true_leaves_the_workload_out_silently() -> None:
    """Basic Night Time Saving.mdx, "Exclusions": `kubectl annotate deployment my-deploy
    downscaler/exclude="true"`."""
    excluded = yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
        "name": "my-deploy", "namespace": "my-namespace", "annotations": {"downscaler/exclude": "true"}}})
    imported = _import(_namespace("my-namespace", downtime=NIGHT_TIME) + "---\n" + excluded)
    assert imported.capacities == [] and imported.notes == []


def test_gokubedownscaler_holiday_guides_one_digit_month_is_refused_as_the_downscaler_refuses_it() -> None:
    """guides/0 - getting-started/2 - Scaling Down for Holidays.mdx writes
    `downscaler/force-downtime: "2025-12-22T00:00:00+01:00 - 2026-1-7T00:00:00+01:00"`; its
    timespan.go parses each side with Go's time.RFC3339, which wants a two-digit month, so the
    downscaler refuses it too. With the month written 01 it is a closed range."""
    broken = _namespace("my-namespace", uptime="Mon-Fri 08:00-20:00 Europe/Berlin",
                        force_downtime="2025-12-22T00:00:00+01:00 - 2026-1-7T00:00:00+01:00")
    text = broken + "---\n" + _deployment("web", "my-namespace")
    with pytest.raises(InputError) as caught:
        _import(text)
    (diagnostic,) = caught.value.diagnostics
    assert diagnostic.field == "metadata.annotations.downscaler/force-downtime"
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "downscaler/force-downtime" in l)
    assert diagnostic.location.line == line
    assert "RFC 3339" in diagnostic.message
    fixed = _import(text.replace("2026-1-7", "2026-01-07"))
    spec = _spec(fixed, "downscaler")
    assert not tb.is_active(spec, _at("2026-01-05T10:00:00+01:00"))  # a Monday in the holidays
    assert tb.is_active(spec, _at("2026-01-07T10:00:00+01:00"))


def test_one_way_periods_and_other_kinds_are_reported_not_imported() -> None:
    """Values.mdx: downscale-period "Within these periods the workload will be scaled down", and
    nothing outside; a CronJob with downscaler annotations (Basic Night Time Saving.mdx,
    `kubectl annotate cronjob my-job downscaler/exclude-until=...`)."""
    cronjob = yaml.safe_dump({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {
        "name": "my-job", "namespace": "p", "annotations": {
            "downscaler/exclude-until": "2025-12-22T00:00:00+01:00"}}})
    imported = _import("---\n".join([_namespace("p", downscale_period="Mon-Fri 20:00-21:00 UTC"),
                                     _deployment("web", "p"), cronjob]))
    assert imported.capacities == []
    assert {n.field for n in imported.notes} == {"metadata.annotations"}
    assert any("scales one way only" in n.message for n in imported.notes)
    assert any("batch/v1 CronJob p/my-job" in n.message for n in imported.notes)


def test_statefulsets_are_imported_only_when_the_downscaler_includes_them() -> None:
    sts = _deployment("db", "night", 1).replace("Deployment", "StatefulSet")
    text = _namespace("night", downtime=NIGHT_TIME) + "---\n" + sts
    assert _import(text).capacities == []
    both = _import(text, downscaler_kinds=("Deployment", "StatefulSet"))
    assert [(c.kind, c.target) for c in both.capacities] == [("StatefulSet", "db")]


def test_the_downscalers_original_replicas_annotation_is_the_value_woken_to() -> None:
    asleep = yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
        "name": "api", "namespace": "night", "annotations": {"downscaler/original-replicas": "5"}},
        "spec": {"replicas": 0}})
    imported = _import(_namespace("night", downtime=NIGHT_TIME) + "---\n" + asleep)
    assert [(c.target, c.value) for c in imported.capacities] == [("api", 5)]


# --- KEDA: keda.sh/docs/2.17/scalers/cron/ and keda.sh/docs/1.5/scalers/cron ---------------------

def _scaled_object(*triggers: dict[str, str], **spec: Any) -> str:
    return yaml.safe_dump({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                           "metadata": {"name": "office", "namespace": "k"},
                           "spec": {"scaleTargetRef": {"name": "worker"}, **spec,
                                    "triggers": [{"type": "cron", "metadata": t} for t in triggers]}})


KEDA_OFFICE = {"timezone": "Asia/Kolkata", "start": "0 6 * * *", "end": "0 20 * * *", "desiredReplicas": "10"}
"""The trigger specification of the 2.x page (2.17 "Latest" and the 2.18 docs)."""
KEDA_HOURLY = {"timezone": "Asia/Kolkata", "start": "30 * * * *", "end": "45 * * * *", "desiredReplicas": "10"}
"""The 1.5 page's trigger specification: every hour from :30 to :45."""


def test_keda_docs_office_hours_trigger_is_open_six_to_eight_and_says_the_cooldown_differs() -> None:
    imported = _import(_scaled_object(KEDA_OFFICE) + "---\n" + _deployment("worker", "k", 1))
    assert [(c.target, c.value) for c in imported.capacities] == [("worker", 10)]
    spec = _spec(imported, "keda-office")
    assert tb.is_active(spec, _at("2026-12-07T06:00:00+05:30"))
    assert not tb.is_active(spec, _at("2026-12-07T20:00:00+05:30"))
    assert any("cooldownPeriod" in n.message for n in imported.notes)


def test_keda_docs_hourly_trigger_is_a_window_every_hour() -> None:
    spec = _spec(_import(_scaled_object(KEDA_HOURLY)), "keda-office")
    assert len(spec.windows or ()) == 24
    assert tb.is_active(spec, _at("2026-12-09T03:30:00+05:30"))
    assert not tb.is_active(spec, _at("2026-12-09T03:45:00+05:30"))


def test_keda_docs_invalid_example_start_equal_to_end_is_an_error() -> None:
    """The 2.x page: "Start and end should not be the same ... the following schedule is not
    valid: start: 0 6 * * *, end: 0 6 * * *"."""
    with pytest.raises(InputError) as caught:
        _import(_scaled_object({**KEDA_OFFICE, "end": "0 6 * * *"}))
    assert "start and end are the same" in str(caught.value)
    assert caught.value.diagnostics[0].field == "spec.triggers"


@pytest.mark.parametrize(("spec", "why"), [
    ({"minReplicaCount": 2}, "minReplicaCount is 2"),
    ({"advancedTrigger": None}, "triggers other than cron"),
])
def test_a_scaled_object_fivespot_cannot_match_is_reported_not_imported(spec: dict[str, Any], why: str) -> None:
    text = _scaled_object(KEDA_OFFICE, **{k: v for k, v in spec.items() if v is not None})
    if "advancedTrigger" in spec:
        data = yaml.safe_load(text)
        data["spec"]["triggers"].append({"type": "cpu", "metadata": {"value": "50"}})
        text = yaml.safe_dump(data)
    imported = _import(text)
    assert imported.capacities == []
    assert any(why in n.message for n in imported.notes)


# --- every form of the reference page behaves as its fivespot form ---------------------------------

def _peer_text(tool: str, form: dict[str, Any]) -> str:
    if tool == "kube-green":
        return yaml.safe_dump({"apiVersion": "kube-green.com/v1alpha1", "kind": "SleepInfo",
                               "metadata": {"name": "s", "namespace": "team"}, "spec": form})
    if tool == "KEDA cron":
        return _scaled_object({**form, "desiredReplicas": "1"}).replace("namespace: k", "namespace: team")
    return _namespace("team", **{k.replace("-", "_"): v for k, v in form.items()})


@pytest.mark.parametrize(("ident", "tool", "theirs", "ours", "week"), ROWS, ids=[r[0] for r in ROWS])
def test_importing_each_reference_form_behaves_as_the_pages_fivespot_form(
        ident: str, tool: str, theirs: dict[str, Any], ours: dict[str, Any], week: dt.date) -> None:
    imported = _import(_peer_text(tool, theirs) + "---\n" + _deployment("web", "team"))
    expected = TimeBasedSpotScheduleSpec.model_validate(ours)
    if not imported.schedules:  # always up: nothing to schedule
        assert imported.capacities == [] and ident == "gkd-always"
        got = TimeBasedSpotScheduleSpec.model_validate({"windows": [
            {"days": "mon-sun", "start": "00:00", "end": "24:00"}]})
    else:
        (schedule,) = imported.schedules
        got = TimeBasedSpotScheduleSpec.model_validate(schedule.spec)
    start = dt.datetime.combine(week, dt.time(), expected.zone).astimezone(UTC)
    instants = [start + dt.timedelta(minutes=30 * i) for i in range(7 * 48)]
    for spec in (expected, got):
        at = start
        while (following := tb.next_transition(spec, at)) is not None and following < start + dt.timedelta(days=7):
            instants += [following, following - dt.timedelta(minutes=1)]
            at = following
    for instant in sorted(instants):
        assert tb.is_active(got, instant) is tb.is_active(expected, instant), (ident, instant)


# --- the files and the command --------------------------------------------------------------------

def test_the_output_is_the_same_for_the_same_input_in_any_order() -> None:
    parts = [KUBE_GREEN_README_WORKING_HOURS, _deployment("web", "shop"), _namespace("night", downtime=NIGHT_TIME),
             _deployment("api", "night"), _scaled_object(KEDA_OFFICE)]
    files = [read_text(text, f"file-{i}.yaml") for i, text in enumerate(parts)]
    first = render(import_objects(d for f in files for d in f), ["x"])
    second = render(import_objects(d for f in reversed(files) for d in f), ["x"])
    assert first == second and len(first["REPORT.md"].splitlines()) > 10


def _fivespot(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fivespot", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_the_imported_repo_passes_test_compile_and_check_as_a_user_runs_them(tmp_path: Path) -> None:
    peers = tmp_path / "peers"
    peers.mkdir()
    (peers / "kube-green.yaml").write_text(KUBE_GREEN_README_WORKING_HOURS + "---\n" + _deployment("web", "shop"))
    (peers / "downscaler.yaml").write_text(_namespace("night", downtime=NIGHT_TIME) + "---\n"
                                           + _deployment("api", "night", 4))
    (peers / "keda.yaml").write_text(_scaled_object(KEDA_OFFICE))
    done = _fivespot("import", "peers", "--out", "imported", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "3 ScheduledCapacity(ies)" in done.stdout
    out = tmp_path / "imported"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "REPORT.md", "config/consumers.yaml", "config/fixtures/imported.yaml", "config/platform.yaml",
        "config/providers.yaml", "config/tenants.yaml", "tenant/capacities/k.yaml",
        "tenant/capacities/night.yaml", "tenant/capacities/shop.yaml", "tenant/schedules/k.yaml",
        "tenant/schedules/night.yaml", "tenant/schedules/shop.yaml"]
    tested = _fivespot("test", "imported/config", cwd=tmp_path)
    assert tested.returncode == 0 and "3 fixtures: 3 passed" in tested.stdout, tested.stdout + tested.stderr
    compiled = _fivespot("compile", "imported/config", "--out", "deploy", cwd=tmp_path)
    assert compiled.returncode == 0, compiled.stderr
    checked = _fivespot("check", "imported/tenant", "--policies", "deploy", cwd=tmp_path)
    assert checked.returncode == 0 and "6 objects: 6 allowed" in checked.stdout, checked.stdout


def test_import_never_writes_into_a_folder_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "peer.yaml").write_text(KUBE_GREEN_README_WORKING_HOURS)
    mine = tmp_path / "out" / "notes.txt"
    mine.parent.mkdir()
    mine.write_text("mine")
    done = _fivespot("import", "peer.yaml", "--out", "out", cwd=tmp_path)
    assert done.returncode == 2 and "not empty" in done.stderr
    assert [p.name for p in mine.parent.iterdir()] == ["notes.txt"] and mine.read_text() == "mine"


def test_bad_input_writes_nothing_and_names_file_line_and_field(tmp_path: Path) -> None:
    (tmp_path / "peer.yaml").write_text(KUBE_GREEN_README_WORKING_HOURS.replace('"20:00"', '"20:61"'))
    done = _fivespot("import", "peer.yaml", "--out", "out", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("peer.yaml:8:3: spec.sleepAt: '61' is not a number from 0 to 59")
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()
