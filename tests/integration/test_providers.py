"""The built-in provider controllers against the real control plane, each running as its own
ServiceAccount with the compiled RBAC (a real token; the API server's authorizer decides).

The example is compiled and installed once; each test starts the provider controllers it needs
(in-process, so the timing test can shift the wall clock; one test runs the real command) and
stops them afterwards, which releases their Leases for the next test.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import holidays
import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from fivespot.api.bundle import parse_bundle
from fivespot.api.kinds.providers import (
    CapitalMarketsScheduleSpec,
    DAYS_MESSAGE,
    HOURS_MESSAGE,
    SESSION_ORDER_MESSAGE,
    TIMEZONE_MESSAGE,
)
from fivespot.controllers.spotschedules import capital_markets
from fivespot.controllers.spotschedules.controller import PROVIDER_TYPES
from fivespot.controllers.spotschedules.managers import provider_manager
from fivespot.runtime.manager import Manager, Settings
from fivespot.controllers.spotschedules.status import rfc3339
from fivespot.devcluster import localrun
from fivespot.devcluster.clients import client_as_service_account, service_account_kubeconfig
from fivespot.devcluster.kubectl import kubectl
from fivespot.runtime.clock import SYSTEM_CLOCK, Clock
from fivespot.runtime.leaderelection import Timing
from fivespot.runtime.partitions import Partitions
from tests.integration.authorizer import wait_in_force

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent-sandbox"
GROUP = "spotschedules.5spot.finos.org"
VERSION = "v1alpha1"
INSTALL_NS = "5spot-system"
UTC = dt.timezone.utc
FAST_LEASES = Timing(lease_duration_s=6.0, renew_deadline_s=4.0, retry_period_s=1.0, poll_s=0.25,
                     solo_lease_duration_s=12.0)


@pytest.fixture(scope="module")
def installed(kubeconfig: Path, admin: client.ApiClient,
              tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compiled example, installed as `make demo` installs it (without the webhook
    configuration, which calls a Service a local API server has not got), its RBAC in force;
    returns OUT_DIR."""
    out = tmp_path_factory.mktemp("providers") / "out"
    localrun.compile_and_install(kubeconfig, out)
    wait_in_force(admin, localrun.compiled_objects(out))
    return out


class ShiftedClock:
    """The real clocks with the wall clock moved by `offset` (a boundary made seconds away)."""

    def __init__(self, offset: dt.timedelta):
        self.offset = offset

    def monotonic(self) -> float:
        return SYSTEM_CLOCK.monotonic()

    def now(self) -> dt.datetime:
        return SYSTEM_CLOCK.now() + self.offset


RunProvider = Callable[..., Manager]


@pytest.fixture
def run_provider(installed: Path, kubeconfig: Path) -> Iterator[RunProvider]:
    """`run_provider(command, clock=...)`: that provider's controller, as its ServiceAccount,
    leading every partition of the example's bundle."""
    started: list[tuple[Manager, threading.Event]] = []
    bundle = json.loads((installed / "bundle.json").read_text())

    def start(command: str, clock: Clock = SYSTEM_CLOCK) -> Manager:
        provider = PROVIDER_TYPES[command]
        api = client_as_service_account(kubeconfig, INSTALL_NS, provider.component, create=False)
        parsed = parse_bundle(bundle)
        controller, _ = provider_manager(api, provider, Settings(
            bundle=parsed, identity=f"test-{command}-{os.getpid()}", namespace=INSTALL_NS,
            partitions=Partitions.from_bundle(parsed), workers=2, timing=FAST_LEASES), clock=clock)
        stop = threading.Event()
        started.append((controller, stop))
        assert controller.start(stop, sync_timeout_s=30)
        _until(lambda: controller.elector.leading() == set(controller.partitions.names),
               f"{command} never led every partition", timeout=60)
        return controller

    yield start
    for controller, stop in started:
        stop.set()
        controller.stop()
        controller.api.close()


def _until(condition: Callable[[], Any], what: str, timeout: float = 60.0, every: float = 0.05) -> Any:
    """`condition()` once truthy; the generous timeout costs nothing when it holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(what)


def _objects(admin: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(admin)


def _create(admin: client.ApiClient, namespace: str, plural: str, kind: str, name: str,
            spec: Mapping[str, Any]) -> dict[str, Any]:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind,
            "metadata": {"name": name}, "spec": dict(spec)}
    created: dict[str, Any] = _objects(admin).create_namespaced_custom_object(
        GROUP, VERSION, namespace, plural, body)
    return created


def _get(admin: client.ApiClient, namespace: str, plural: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = _objects(admin).get_namespaced_custom_object(
        GROUP, VERSION, namespace, plural, name)
    return found


def _patch_spec(admin: client.ApiClient, namespace: str, plural: str, name: str,
                spec: Mapping[str, Any]) -> None:
    _objects(admin).patch_namespaced_custom_object(GROUP, VERSION, namespace, plural, name,
                                                   {"spec": dict(spec)})


def _status_when(admin: client.ApiClient, namespace: str, plural: str, name: str,
                 test: Callable[[dict[str, Any]], bool], what: str, timeout: float = 60.0
                 ) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        status = _get(admin, namespace, plural, name).get("status") or {}
        return status if test(status) else None

    found: dict[str, Any] = _until(ready, f"{namespace}/{name}: {what}", timeout)
    return found


def _ready(status: Mapping[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "Ready")


# --- identities ----------------------------------------------------------------------------------


def _can_i_list(kubeconfig: Path, service_account: str) -> dict[str, set[str]]:
    """`kubectl auth can-i --list --as=...` in a tenant namespace: resource -> verbs."""
    text = kubectl(kubeconfig, "auth", "can-i", "--list", "-n", "agents",
                   f"--as=system:serviceaccount:{INSTALL_NS}:{service_account}")
    rights: dict[str, set[str]] = {}
    for line in text.splitlines()[1:]:
        resource, _, rest = line.partition(" ")
        verbs = rest[rest.rindex("[") + 1:rest.rindex("]")].split() if "[" in rest else []
        rights.setdefault(resource, set()).update(verbs)
    return rights


@pytest.mark.parametrize("command", sorted(PROVIDER_TYPES))
def test_each_provider_identity_reads_its_kind_and_writes_only_its_status(
    installed: Path, kubeconfig: Path, command: str
) -> None:
    provider = PROVIDER_TYPES[command]
    plural = provider.kind.plural
    rights = _can_i_list(kubeconfig, provider.component)
    assert rights[f"{plural}.{GROUP}"] == {"get", "list", "watch"}
    assert rights[f"{plural}.{GROUP}/status"] == {"get", "patch", "update"}
    writable = {resource for resource, verbs in rights.items()
                if verbs & {"create", "update", "patch", "delete", "deletecollection", "*"}
                and not resource.startswith("selfsubject")}  # every user may ask who it is
    assert writable == {f"{plural}.{GROUP}/status", "events.events.k8s.io"}
    others = {t.kind.plural for t in PROVIDER_TYPES.values()} - {plural}
    as_sa = f"--as=system:serviceaccount:{INSTALL_NS}:{provider.component}"
    for verb, resource, expected in [
        ("patch", f"{plural}.{GROUP}", "no"),
        ("patch", f"{plural}.{GROUP}/status", "yes"),
        *[("patch", f"{other}.{GROUP}/status", "no") for other in sorted(others)],
        ("patch", "scheduledcapacities.5spot.finos.org", "no"),
    ]:
        name, _, sub = resource.partition("/")
        args = ["auth", "can-i", verb, name, "-n", "agents", as_sa]
        if sub:
            args.append(f"--subresource={sub}")
        result = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *args],
                                capture_output=True, text=True, timeout=30)
        assert result.stdout.strip() == expected, (verb, resource, result.stdout, result.stderr)


# --- the status contract -------------------------------------------------------------------------


def test_manual_schedule_publishes_the_contract_status_and_flips_on_each_spec_edit(
    run_provider: RunProvider, admin: client.ApiClient, namespace: str
) -> None:
    run_provider("manual")
    _create(admin, namespace, "manualschedules", "ManualSchedule", "desk", {"enabled": True})
    first = _status_when(admin, namespace, "manualschedules", "desk",
                         lambda s: s.get("active") is True, "active: true")
    assert first["observedGeneration"] == 1
    assert "nextTransitionTime" not in first
    ready = _ready(first)
    assert (ready["status"], ready["reason"], ready["message"]) == \
        ("True", "Reconciled", "manual toggle applied")
    time.sleep(1.1)  # timestamps have whole seconds; make a move visible

    _patch_spec(admin, namespace, "manualschedules", "desk", {"enabled": False})
    second = _status_when(admin, namespace, "manualschedules", "desk",
                          lambda s: s.get("observedGeneration") == 2, "observedGeneration 2")
    assert second["active"] is False
    assert second["lastTransitionTime"] > first["lastTransitionTime"]
    assert _ready(second)["lastTransitionTime"] == ready["lastTransitionTime"]  # Ready stayed True


def test_a_time_based_spec_edit_that_keeps_the_window_closed_leaves_last_transition_time(
    run_provider: RunProvider, admin: client.ApiClient, namespace: str
) -> None:
    run_provider("time-based")
    now = dt.datetime.now(UTC)
    closed_hour = (now + dt.timedelta(hours=3)).hour  # not this hour in UTC or in UTC+1
    spec = {"daysOfWeek": ["mon-sun"], "hoursOfDay": [str(closed_hour)], "timezone": "UTC"}
    _create(admin, namespace, "timebasedspotschedules", "TimeBasedSpotSchedule", "night", spec)
    first = _status_when(admin, namespace, "timebasedspotschedules", "night",
                         lambda s: "active" in s, "a status")
    opens = (now + dt.timedelta(hours=3)).replace(minute=0, second=0, microsecond=0)
    assert first["active"] is False
    assert first["nextTransitionTime"] == rfc3339(opens)
    assert (_ready(first)["status"], _ready(first)["reason"]) == ("True", "WindowClosed")
    time.sleep(1.1)

    _patch_spec(admin, namespace, "timebasedspotschedules", "night",
                {**spec, "timezone": "Etc/GMT-1"})  # POSIX sign: UTC+1, opens an hour earlier
    second = _status_when(admin, namespace, "timebasedspotschedules", "night",
                          lambda s: s.get("observedGeneration") == 2, "observedGeneration 2")
    assert second["active"] is False
    assert second["lastTransitionTime"] == first["lastTransitionTime"]
    assert second["nextTransitionTime"] == rfc3339(opens - dt.timedelta(hours=1))


def test_a_time_based_schedule_flips_at_its_boundary_on_its_own_timer(
    run_provider: RunProvider, admin: client.ApiClient, namespace: str
) -> None:
    # Shift the provider's wall clock so that the next whole hour is 10 s away, counted once the
    # provider leads (its start can take seconds on a loaded machine): the first status is
    # written well before the boundary.
    clock = ShiftedClock(dt.timedelta(0))
    run_provider("time-based", clock=clock)
    real = dt.datetime.now(UTC)
    boundary = (real + dt.timedelta(hours=2)).replace(minute=0, second=0, microsecond=0)
    offset = boundary - (real + dt.timedelta(seconds=10))
    clock.offset = offset
    spec = {"daysOfWeek": ["mon-sun"], "hoursOfDay": [str(boundary.hour)], "timezone": "UTC"}
    _create(admin, namespace, "timebasedspotschedules", "TimeBasedSpotSchedule", "soon", spec)
    before = _status_when(admin, namespace, "timebasedspotschedules", "soon",
                          lambda s: "active" in s, "a status")
    assert before["active"] is False
    assert before["nextTransitionTime"] == rfc3339(boundary)

    after = _status_when(admin, namespace, "timebasedspotschedules", "soon",
                         lambda s: s.get("active") is True, "active: true", timeout=60)
    seen = dt.datetime.now(UTC) + offset
    # The flip comes from the provider's own timer, not its 600 s resync: 5 s leaves room for a
    # loaded machine (bench/providers measures the latency, within a second, on a quiet one).
    assert dt.timedelta(0) <= seen - boundary <= dt.timedelta(seconds=5), seen - boundary
    assert after["lastTransitionTime"] == rfc3339(boundary)
    assert after["nextTransitionTime"] == rfc3339(boundary + dt.timedelta(hours=1))
    assert (_ready(after)["status"], _ready(after)["reason"]) == ("True", "WindowOpen")


def _shifted_to(clock: ShiftedClock, boundary: dt.datetime, lead_s: float = 10.0) -> dt.timedelta:
    """Move `clock` so that `boundary` is `lead_s` seconds away; the offset."""
    clock.offset = boundary - (dt.datetime.now(UTC) + dt.timedelta(seconds=lead_s))
    return clock.offset


def _flips_at(admin: client.ApiClient, namespace: str, name: str, boundary: dt.datetime,
              offset: dt.timedelta, active: bool) -> dict[str, Any]:
    wait = (boundary - (dt.datetime.now(UTC) + offset)).total_seconds() + 60
    after = _status_when(admin, namespace, "timebasedspotschedules", name,
                         lambda s: s.get("active") is active, f"active: {active}", timeout=wait)
    seen = dt.datetime.now(UTC) + offset
    assert dt.timedelta(0) <= seen - boundary <= dt.timedelta(seconds=5), seen - boundary
    assert after["lastTransitionTime"] == rfc3339(boundary)
    return after


def test_a_minute_window_in_a_quarter_hour_zone_opens_and_closes_on_its_minutes(
    run_provider: RunProvider, admin: client.ApiClient, namespace: str
) -> None:
    clock = ShiftedClock(dt.timedelta(0))
    run_provider("time-based", clock=clock)
    kathmandu = ZoneInfo("Asia/Kathmandu")  # UTC+05:45: no window here starts on a UTC hour
    opens = (dt.datetime.now(UTC) + dt.timedelta(hours=2)).replace(second=0, microsecond=0)
    closes = opens + dt.timedelta(minutes=1)
    local_open, local_close = opens.astimezone(kathmandu), closes.astimezone(kathmandu)
    spec = {"timezone": "Asia/Kathmandu", "windows": [
        {"days": "mon-sun", "start": f"{local_open:%H:%M}", "end": f"{local_close:%H:%M}"}]}
    offset = _shifted_to(clock, opens)
    _create(admin, namespace, "timebasedspotschedules", "TimeBasedSpotSchedule", "minute", spec)
    before = _status_when(admin, namespace, "timebasedspotschedules", "minute",
                          lambda s: "active" in s, "a status")
    assert before["active"] is False and before["nextTransitionTime"] == rfc3339(opens)
    opened = _flips_at(admin, namespace, "minute", opens, offset, active=True)
    assert opened["nextTransitionTime"] == rfc3339(closes)
    assert (_ready(opened)["status"], _ready(opened)["reason"]) == ("True", "WindowOpen")
    closed = _flips_at(admin, namespace, "minute", closes, offset, active=False)
    assert closed["nextTransitionTime"] == rfc3339(opens + dt.timedelta(days=1))


def test_a_public_holiday_closes_the_schedule_at_its_local_midnight(
    run_provider: RunProvider, admin: client.ApiClient, namespace: str
) -> None:
    clock = ShiftedClock(dt.timedelta(0))
    run_provider("time-based", clock=clock)
    london = ZoneInfo("Europe/London")
    today = dt.datetime.now(london).date()
    calendar = holidays.country_holidays("GB", subdiv="ENG", years=[today.year, today.year + 1])
    holiday = min(day for day in calendar
                  if day > today + dt.timedelta(days=1) and day - dt.timedelta(days=1) not in calendar)
    reopens_on = holiday + dt.timedelta(days=1)
    while reopens_on in calendar:
        reopens_on += dt.timedelta(days=1)
    boundary = dt.datetime.combine(holiday, dt.time(), london).astimezone(UTC)
    reopens = dt.datetime.combine(reopens_on, dt.time(), london).astimezone(UTC)
    spec = {"timezone": "Europe/London",
            "windows": [{"days": "mon-sun", "start": "00:00", "end": "24:00"}],
            "closed": {"holidays": [{"country": "GB", "subdivision": "ENG"}]}}
    offset = _shifted_to(clock, boundary)
    _create(admin, namespace, "timebasedspotschedules", "TimeBasedSpotSchedule", "bank", spec)
    _create(admin, namespace, "timebasedspotschedules", "TimeBasedSpotSchedule", "nowhere",
            {**spec, "closed": {"holidays": [{"country": "XX"}]}})  # admitted: the shape is fine
    before = _status_when(admin, namespace, "timebasedspotschedules", "bank",
                          lambda s: "active" in s, "a status")
    assert before["active"] is True and before["nextTransitionTime"] == rfc3339(boundary)
    closed = _flips_at(admin, namespace, "bank", boundary, offset, active=False)
    assert closed["nextTransitionTime"] == rfc3339(reopens)
    unknown = _status_when(admin, namespace, "timebasedspotschedules", "nowhere",
                           lambda s: "conditions" in s, "a status")
    assert (_ready(unknown)["status"], _ready(unknown)["reason"]) == ("False", "InvalidSpec")
    assert "has no country 'XX'" in _ready(unknown)["message"]


def test_the_compiled_nyse_calendar_in_the_agents_partition_gets_its_session_status(
    run_provider: RunProvider, admin: client.ApiClient
) -> None:
    run_provider("capital-markets")
    nyse = _get(admin, "agents", "capitalmarketsschedules", "nyse")
    status = _status_when(admin, "agents", "capitalmarketsschedules", "nyse",
                          lambda s: s.get("observedGeneration") == nyse["metadata"]["generation"],
                          "a status for the current generation")
    spec = CapitalMarketsScheduleSpec.model_validate(nyse["spec"])
    now = dt.datetime.now(UTC)
    assert status["active"] is capital_markets.is_active(spec, now)
    following = capital_markets.next_transition(spec, now)
    assert status.get("nextTransitionTime") == (rfc3339(following) if following else None)
    assert _ready(status)["reason"] in ("SessionOpen", "SessionClosed")


def test_an_overnight_futures_calendar_is_admitted_and_published_like_the_model_decides(
    run_provider: RunProvider, admin: client.ApiClient, namespace: str, kubeconfig: Path
) -> None:
    from fivespot.compiler.calendars import expand_exchange

    run_provider("capital-markets")
    spec = expand_exchange("CMES", 2026, 2027).spec_fields()
    _create(admin, namespace, "capitalmarketsschedules", "CapitalMarketsSchedule", "globex", spec)
    status = _status_when(admin, namespace, "capitalmarketsschedules", "globex",
                          lambda s: "active" in s, "a status")
    expected = CapitalMarketsScheduleSpec.model_validate(spec)
    now = dt.datetime.now(dt.timezone.utc)
    assert status["active"] is capital_markets.is_active(expected, now)
    upcoming = capital_markets.next_transition(expected, now)
    assert upcoming is not None
    assert status["nextTransitionTime"] == rfc3339(upcoming)
    # kubectl shows the future instant as text, not as <invalid> (a date column's future age).
    shown = kubectl(kubeconfig, "get", "capitalmarketsschedules", "globex", "-n", namespace)
    assert status["nextTransitionTime"] in shown and "<invalid>" not in shown, shown


def test_a_capital_markets_session_opening_next_minute_is_announced_to_the_minute(
    run_provider: RunProvider, admin: client.ApiClient, namespace: str
) -> None:
    run_provider("capital-markets")
    now = dt.datetime.now(UTC)
    opens = (now + dt.timedelta(minutes=2)).replace(second=0, microsecond=0)
    if opens.date() != now.date():
        opens = now.replace(hour=23, minute=58, second=0, microsecond=0)
    spec = {"timezone": "UTC",
            "sessions": [{"days": "mon-sun", "open": opens.strftime("%H:%M"), "close": "24:00"}]}
    _create(admin, namespace, "capitalmarketsschedules", "CapitalMarketsSchedule", "desk", spec)
    status = _status_when(admin, namespace, "capitalmarketsschedules", "desk",
                          lambda s: "active" in s, "a status")
    expected = CapitalMarketsScheduleSpec.model_validate(spec)
    assert status["active"] is capital_markets.is_active(expected, now)
    if not status["active"]:
        assert status["nextTransitionTime"] == rfc3339(opens)


# --- admission ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("plural", "kind", "spec", "message"), [
    ("timebasedspotschedules", "TimeBasedSpotSchedule",
     {"daysOfWeek": ["mon-fri"], "hoursOfDay": ["9-17"], "timezone": "Not A Zone!"},
     TIMEZONE_MESSAGE),
    ("timebasedspotschedules", "TimeBasedSpotSchedule",
     {"daysOfWeek": ["mon-fri"], "hoursOfDay": ["9-17"], "timezone": "Mars/Olympus_Mons"},
     "unknown time zone Mars/Olympus_Mons"),
    ("timebasedspotschedules", "TimeBasedSpotSchedule",
     {"daysOfWeek": ["mon-fri"], "hoursOfDay": ["9-25"], "timezone": "UTC"}, HOURS_MESSAGE),
    ("timebasedspotschedules", "TimeBasedSpotSchedule",
     {"daysOfWeek": ["mon-funday"], "hoursOfDay": ["9"], "timezone": "UTC"}, DAYS_MESSAGE),
    ("capitalmarketsschedules", "CapitalMarketsSchedule",
     {"timezone": "America/New_York",
      "sessions": [{"days": "mon-fri", "open": "16:00", "close": "09:30"}]},
     SESSION_ORDER_MESSAGE),
    ("capitalmarketsschedules", "CapitalMarketsSchedule",
     {"timezone": "America/Chicago",
      "sessions": [{"days": "mon-fri", "open": "17:00", "close": "18:00", "opensPreviousDay": True}]},
     SESSION_ORDER_MESSAGE),
    ("capitalmarketsschedules", "CapitalMarketsSchedule",
     {"timezone": "America/Chicago", "sessions": [{"days": "mon-fri", "open": "09:30", "close": "16:00"}],
      "specialSessions": [{"date": "2026-01-02", "sessions": [{"open": "17:00", "close": "09:00"}]}]},
     SESSION_ORDER_MESSAGE),
])
def test_invalid_specs_are_refused_at_admission_with_the_rule_message(
    installed: Path, admin: client.ApiClient, namespace: str, plural: str, kind: str,
    spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(ApiException) as refused:
        _create(admin, namespace, plural, kind, "bad", spec)
    assert refused.value.status == 422
    assert message in json.loads(refused.value.body)["message"]


# --- the command ---------------------------------------------------------------------------------


def test_the_provider_command_runs_as_its_service_account_and_releases_its_leases_on_sigterm(
    installed: Path, kubeconfig: Path, admin: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    config = service_account_kubeconfig(kubeconfig, INSTALL_NS, "fivespot-provider-manual",
                                        tmp_path / "manual.kubeconfig")
    process = subprocess.Popen(
        [sys.executable, "-m", "fivespot.controllers.spotschedules", "manual",
         "--bundle", str(installed / "bundle.json"), "--kubeconfig", str(config),
         "--lease-namespace", INSTALL_NS, "--identity", "cli-test", "--metrics-port", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _create(admin, namespace, "manualschedules", "ManualSchedule", "cli", {"enabled": True})
        _status_when(admin, namespace, "manualschedules", "cli",
                     lambda s: s.get("active") is True, "active: true", timeout=90)
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert any(line["msg"] == "status written" and line["key"] == f"{namespace}/cli"
               for line in lines)
    coordination = client.CoordinationV1Api(admin)
    for partition in ("agents", "default"):
        lease = coordination.read_namespaced_lease(f"fivespot-provider-manual-{partition}",
                                                   INSTALL_NS)
        assert not lease.spec.holder_identity, partition


def test_the_providers_own_status_write_coming_back_is_not_reconciled_but_a_foreign_one_is(
    run_provider: RunProvider, admin: client.ApiClient, namespace: str
) -> None:
    from prometheus_client import REGISTRY

    controller = run_provider("manual")

    def reconciles() -> float:
        value = REGISTRY.get_sample_value("fivespot_reconcile_duration_seconds_count",
                                          {"controller": controller.component})
        return value or 0.0

    def settled() -> bool:
        # The cache holds what the server holds (the last write's event arrived and was
        # handled), and nothing is queued or being reconciled.
        cached = controller.primary.get(namespace, "echo") or {}
        served = _get(admin, namespace, "manualschedules", "echo")
        return (cached.get("metadata", {}).get("resourceVersion")
                == served["metadata"]["resourceVersion"]
                and len(controller.queue) == 0 and not controller.queue.processing())

    _create(admin, namespace, "manualschedules", "ManualSchedule", "echo", {"enabled": True})
    _status_when(admin, namespace, "manualschedules", "echo", lambda s: s.get("active") is True,
                 "active: true")
    _until(settled, "the first write never settled")
    time.sleep(0.5)
    before = reconciles()

    _patch_spec(admin, namespace, "manualschedules", "echo", {"enabled": False})
    _status_when(admin, namespace, "manualschedules", "echo",
                 lambda s: s.get("observedGeneration") == 2, "observedGeneration 2")
    _until(settled, "the spec edit's write never settled")
    time.sleep(0.5)
    assert reconciles() - before == 1  # the spec edit; not the event of its own status write

    # Someone else's status write is an event like any other: reconciled and put right.
    _objects(admin).patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, "manualschedules", "echo", {"status": {"active": True}})
    _status_when(admin, namespace, "manualschedules", "echo", lambda s: s.get("active") is False,
                 "active put back to false")


def test_a_status_computed_from_a_stale_object_is_refused_not_written(
    installed: Path, kubeconfig: Path, admin: client.ApiClient, namespace: str
) -> None:
    from fivespot.controllers.spotschedules import manual
    from fivespot.controllers.spotschedules.reconcile import plan
    from fivespot.runtime import kube

    stale = _create(admin, namespace, "manualschedules", "ManualSchedule", "raced", {"enabled": True})
    _patch_spec(admin, namespace, "manualschedules", "raced", {"enabled": False})
    decided = plan(stale, manual.evaluate, dt.datetime.now(UTC))
    assert decided.patch is not None and decided.patch["status"]["active"] is True
    api = client_as_service_account(kubeconfig, INSTALL_NS, "fivespot-provider-manual", create=False)
    try:
        with pytest.raises(kube.ApiError) as refused:
            kube.merge_patch(api, kube.resource_path(GROUP, VERSION, "manualschedules", namespace,
                                                     "raced", "status"), decided.patch)
    finally:
        api.close()
    assert refused.value.conflict
    assert "status" not in _get(admin, namespace, "manualschedules", "raced")
