"""CompositeSchedule against the real control plane, with the real child providers running.

The example (which installs CompositeSchedule) is compiled and installed; the ManualSchedule,
TimeBasedSpotSchedule and CompositeSchedule controllers run in-process, each as its own
ServiceAccount with the compiled RBAC, and the capacity controller runs as a separate process,
so a ScheduledCapacity following a composite is flipped end to end: a child's spec edit, its
provider's status write, the composite's status write, the capacity controller's target write.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from fivespot.api.bundle import parse_bundle
from fivespot.api.kinds.composite import NODE_FORM_MESSAGE, REFERENCE_API_VERSION_MESSAGE
from fivespot.controllers.spotschedules.controller import PROVIDER_TYPES
from fivespot.controllers.spotschedules.managers import provider_manager
from fivespot.runtime.manager import Manager, Settings
from fivespot.devcluster import localrun
from fivespot.devcluster.clients import client_as_service_account
from fivespot.devcluster.kubectl import apply, kubectl, wait_established
from fivespot.runtime import kube
from fivespot.runtime.leaderelection import Timing
from fivespot.runtime.partitions import Partitions
from tests.integration.capacity_world import (
    NS,
    SCAP,
    ControllerProcess,
    World,
    eventually,
    path,
    unique,
)
from tests.integration.test_providers import _can_i_list as can_i_list

GROUP = "spotschedules.5spot.finos.org"
V1 = f"{GROUP}/v1alpha1"
INSTALL_NS = "5spot-system"
FAST_LEASES = Timing(lease_duration_s=6.0, renew_deadline_s=4.0, retry_period_s=1.0, poll_s=0.25,
                     solo_lease_duration_s=12.0)
PLURALS = {"ManualSchedule": "manualschedules", "TimeBasedSpotSchedule": "timebasedspotschedules",
           "CompositeSchedule": "compositeschedules"}
ALWAYS = {"daysOfWeek": ["mon-sun"], "hoursOfDay": ["0-23"], "timezone": "UTC"}


@pytest.fixture(scope="module")
def installed(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(OUT_DIR, the capacity controller ServiceAccount's kubeconfig)."""
    work = tmp_path_factory.mktemp("composite")
    bundle = localrun.compile_and_install(kubeconfig, work / "out")
    return bundle.parent, localrun.controller_kubeconfig(kubeconfig, work / "controller.kubeconfig")


@pytest.fixture(scope="module")
def providers(installed: tuple[Path, Path], kubeconfig: Path) -> Iterator[dict[str, Manager]]:
    """The manual, time-based and composite provider controllers, each as its ServiceAccount."""
    out, _ = installed
    bundle = parse_bundle(json.loads((out / "bundle.json").read_text()))
    running: dict[str, Manager] = {}
    stop = threading.Event()
    for command in ("manual", "time-based", "composite"):
        provider = PROVIDER_TYPES[command]
        api = client_as_service_account(kubeconfig, INSTALL_NS, provider.component, create=False)
        controller, _ = provider_manager(api, provider, Settings(
            bundle=bundle, identity=f"test-{command}-{os.getpid()}", namespace=INSTALL_NS,
            partitions=Partitions.from_bundle(bundle), workers=2, timing=FAST_LEASES,
            resolve_retry_s=1.0))
        assert controller.start(stop, sync_timeout_s=30)
        running[command] = controller
    for command, controller in running.items():
        eventually(lambda: controller.elector.leading() == set(controller.partitions.names), 60,
                   f"{command} leading every partition")
    yield running
    stop.set()
    for controller in running.values():
        controller.stop()
        controller.api.close()


@pytest.fixture(scope="module")
def capacity(installed: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[ControllerProcess]:
    out, sa_kubeconfig = installed
    log = tmp_path_factory.mktemp("composite-log") / "controller.log"
    process = ControllerProcess(sa_kubeconfig, out / "bundle.json", unique("capacity-it"), log).start()
    process.wait_leading("agents", "default")
    yield process
    process.terminate()


def ref(kind: str, name: str) -> dict[str, str]:
    return {"apiVersion": V1, "kind": kind, "name": name}


class Schedules:
    """Provider objects in namespace `agents`, created and edited as the admin."""

    def __init__(self, admin: client.ApiClient):
        self.api = admin

    def create(self, kind: str, name: str, spec: dict[str, Any]) -> None:
        kube.request(self.api, "POST", kube.resource_path(GROUP, "v1alpha1", PLURALS[kind], namespace=NS),
                     body={"apiVersion": V1, "kind": kind, "metadata": {"name": name}, "spec": spec})

    def edit(self, kind: str, name: str, spec: dict[str, Any]) -> None:
        kube.merge_patch(self.api, kube.resource_path(GROUP, "v1alpha1", PLURALS[kind], namespace=NS,
                                                      name=name), {"spec": spec})

    def status(self, kind: str, name: str) -> dict[str, Any]:
        got = kube.request(self.api, "GET", kube.resource_path(GROUP, "v1alpha1", PLURALS[kind],
                                                                namespace=NS, name=name))
        return dict(got.get("status") or {})

    def ready(self, name: str) -> dict[str, Any]:
        conditions = self.status("CompositeSchedule", name).get("conditions") or []
        return next((dict(c) for c in conditions if c["type"] == "Ready"), {})

    def wait(self, name: str, test: Callable[[dict[str, Any]], bool], what: str,
             timeout: float = 60.0) -> dict[str, Any]:
        return eventually(lambda: (s := self.status("CompositeSchedule", name)) and test(s) and s,
                          timeout, f"{name}: {what}")


@pytest.fixture
def schedules(admin: client.ApiClient) -> Schedules:
    return Schedules(admin)


def _capacity_following(admin: client.ApiClient, world: World, schedule: dict[str, str],
                        value: int) -> tuple[str, str]:
    """A new pool and a ScheduledCapacity writing `value` to it while `schedule` is active."""
    pool, scap = unique("pool"), unique("cap")
    world.pool(pool)
    kube.request(admin, "POST", path(SCAP), body={
        "apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
        "metadata": {"name": scap},
        "spec": {"schedule": schedule,
                 "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                               "kind": "VirtualMachinePool", "name": pool},
                 "capacity": {"path": "spec.warmReplicas", "activeValue": value}}})
    return pool, scap


def _ready(status: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})


def test_office_hours_or_override_and_not_freeze_flips_a_scheduled_capacity_exactly_when_it_should(
    providers: dict[str, Manager], capacity: ControllerProcess, schedules: Schedules,
    admin: client.ApiClient,
) -> None:
    office, override, freeze, desk = unique("office"), unique("override"), unique("freeze"), unique("desk")
    schedules.create("TimeBasedSpotSchedule", office, {**ALWAYS, "enabled": False})
    schedules.create("ManualSchedule", override, {"enabled": False})
    schedules.create("ManualSchedule", freeze, {"enabled": False})
    schedules.create("CompositeSchedule", desk, {"allOf": [
        {"anyOf": [ref("TimeBasedSpotSchedule", office), ref("ManualSchedule", override)]},
        {"not": ref("ManualSchedule", freeze)}]})
    world = World(admin)
    pool, scap = _capacity_following(admin, world, ref("CompositeSchedule", desk), 7)

    def expect(active: bool) -> None:
        status = schedules.wait(desk, lambda s: s.get("active") is active and _ready(s).get("status") == "True",
                                f"active={active}")
        assert _ready(status)["reason"] == ("ExpressionTrue" if active else "ExpressionFalse")
        world.wait_phase(scap, "Active" if active else "Inactive", timeout=60)
        assert world.warm(pool) == (7 if active else 0)

    expect(False)                                                        # nothing on
    schedules.edit("TimeBasedSpotSchedule", office, {"enabled": True})
    expect(True)                                                         # office hours
    schedules.edit("ManualSchedule", freeze, {"enabled": True})
    expect(False)                                                        # frozen
    schedules.edit("ManualSchedule", override, {"enabled": True})
    status = schedules.wait(desk, lambda s: "ManualSchedule/" + override + "=active"
                            in _ready(s).get("message", ""), "override on seen")
    assert status["active"] is False                                     # an override does not beat a freeze
    schedules.edit("ManualSchedule", freeze, {"enabled": False})
    expect(True)                                                         # thawed: office and override
    schedules.edit("TimeBasedSpotSchedule", office, {"enabled": False})
    status = schedules.wait(desk, lambda s: "TimeBasedSpotSchedule/" + office + "=inactive"
                            in _ready(s).get("message", ""), "office closed seen")
    assert status["active"] is True                                      # the override holds it
    schedules.edit("ManualSchedule", override, {"enabled": False})
    expect(False)


def test_a_childs_crd_removed_makes_the_composite_unresolved_only_when_it_matters(
    providers: dict[str, Manager], capacity: ControllerProcess,
    installed: tuple[Path, Path], kubeconfig: Path, schedules: Schedules, admin: client.ApiClient,
) -> None:
    on, office = unique("on"), unique("office")
    either, both = unique("either"), unique("both")
    schedules.create("ManualSchedule", on, {"enabled": True})
    schedules.create("TimeBasedSpotSchedule", office, ALWAYS)
    schedules.create("CompositeSchedule", either, {"anyOf": [ref("ManualSchedule", on),
                                                             ref("TimeBasedSpotSchedule", office)]})
    schedules.create("CompositeSchedule", both, {"allOf": [ref("ManualSchedule", on),
                                                           ref("TimeBasedSpotSchedule", office)]})
    for name in (either, both):
        schedules.wait(name, lambda s: s.get("active") is True and _ready(s).get("status") == "True",
                       "active and ready")
    # The capacity controller, following the same child directly, through the same watches code.
    world = World(admin)
    pool, scap = _capacity_following(admin, world, ref("TimeBasedSpotSchedule", office), 3)
    world.wait_phase(scap, "Active", timeout=30)
    out, _ = installed
    crd = out / "crds" / "timebasedspotschedules.spotschedules.5spot.finos.org.yaml"
    kubectl(kubeconfig, "delete", "-f", str(crd), "--wait=true")
    reinstalled = False
    try:
        # The API server deletes the CRD's objects first, so for a moment the child reads as
        # absent; once the watch is answered 404 the kind is dropped: the CRD is reported.
        held = schedules.wait(both, lambda s: "ProviderCRDNotInstalled" in _ready(s).get("message", ""),
                              "the missing CRD reported", timeout=60)
        assert held["active"] is True                                    # the last state is held
        assert _ready(held)["status"] == "False" and _ready(held)["reason"] == "ChildUnresolved"
        assert f"TimeBasedSpotSchedule/{office} at spec.allOf[1]: ProviderCRDNotInstalled" \
            in _ready(held)["message"]
        still = schedules.status("CompositeSchedule", either)
        assert still["active"] is True and _ready(still)["status"] == "True"   # anyOf: on decides
        resolved = eventually(lambda: (c := world.condition(scap, "SpotScheduleResolved"))
                              .get("reason") == "ProviderCRDNotInstalled" and c, 60,
                              "the capacity controller reports the missing CRD")
        assert resolved["status"] == "False" and world.warm(pool) == 3    # held

        # Back as the installer put it (its field manager), so later modules apply cleanly.
        apply(kubeconfig, crd)
        wait_established(kubeconfig, [crd.stem])
        reinstalled = True
        # Watched again: the CRD is back, its object is not (deleting a CRD deletes its objects).
        schedules.wait(both, lambda s: "ScheduleNotFound" in _ready(s).get("message", ""),
                       "the kind watched again", timeout=60)
        eventually(lambda: _create_when_served(schedules, office), 60, "TimeBasedSpotSchedule served")
        recovered = schedules.wait(both, lambda s: _ready(s).get("status") == "True", "recovered",
                                   timeout=60)
        assert recovered["active"] is True and _ready(recovered)["reason"] == "ExpressionTrue"
        eventually(lambda: world.condition(scap, "SpotScheduleResolved").get("status") == "True",
                   60, "the capacity controller follows the schedule again")
    finally:
        if not reinstalled:
            apply(kubeconfig, crd)
            wait_established(kubeconfig, [crd.stem])


def _create_when_served(schedules: Schedules, name: str) -> bool:
    try:
        schedules.create("TimeBasedSpotSchedule", name, ALWAYS)
    except kube.ApiError as error:
        if error.status == 409:
            return True
        if error.status in (404, 405, 503):  # the re-created CRD's storage is not up yet
            return False
        raise
    return True


def test_a_cycle_is_an_invalid_spec_and_a_self_or_foreign_reference_is_refused(
    providers: dict[str, Manager], schedules: Schedules,
) -> None:
    first, second, itself, on = unique("first"), unique("second"), unique("self"), unique("on")
    schedules.create("ManualSchedule", on, {"enabled": True})
    schedules.create("CompositeSchedule", first, {"anyOf": [ref("ManualSchedule", on)]})
    schedules.wait(first, lambda s: s.get("active") is True, "active")
    schedules.create("CompositeSchedule", second, {"not": ref("CompositeSchedule", first)})
    schedules.edit("CompositeSchedule", first, {"anyOf": [ref("ManualSchedule", on),
                                                          ref("CompositeSchedule", second)]})
    for name in (first, second):
        invalid = schedules.wait(name, lambda s: _ready(s).get("reason") == "InvalidSpec", "InvalidSpec")
        assert " is a cycle" in _ready(invalid)["message"]
    assert schedules.status("CompositeSchedule", first)["active"] is True   # held, not flipped

    # A self-reference is visible to the object's own root rule: refused by the API server.
    self_ref = {"allOf": [{"anyOf": [ref("ManualSchedule", on), ref("CompositeSchedule", itself)]}]}
    with pytest.raises(kube.ApiError) as refused:
        schedules.create("CompositeSchedule", itself, self_ref)
    assert refused.value.status == 422
    assert refused.value.message == (
        f'CompositeSchedule.spotschedules.5spot.finos.org "{itself}" is invalid: spec: Invalid '
        f"value: CompositeSchedule {itself} -> {itself} is a cycle; a composite cannot depend on "
        "itself: reference the schedules it would combine, not the CompositeSchedule of the same "
        "name")
    schedules.create("CompositeSchedule", itself, {"anyOf": [ref("ManualSchedule", on)]})
    with pytest.raises(kube.ApiError) as refused:                        # and on update
        schedules.edit("CompositeSchedule", itself, {"anyOf": [ref("CompositeSchedule", itself)]})
    assert refused.value.status == 422 and " is a cycle" in refused.value.message
    schedules.wait(itself, lambda s: s.get("active") is True, "the legal one runs")

    refusals: list[tuple[dict[str, Any], str]] = [
        ({"anyOf": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]},
         REFERENCE_API_VERSION_MESSAGE),
        ({"anyOf": [ref("ManualSchedule", on)], "not": ref("ManualSchedule", on)}, NODE_FORM_MESSAGE),
        ({"not": {"not": {"not": {"not": ref("ManualSchedule", on)}}}}, "nested too deeply"),
    ]
    for spec, message in refusals:
        with pytest.raises(kube.ApiError) as refused:
            schedules.create("CompositeSchedule", unique("bad"), spec)
        assert refused.value.status == 422 and message in refused.value.message, refused.value.message


def test_the_composite_identity_reads_every_provider_kind_and_writes_only_its_own_status(
    installed: tuple[Path, Path], kubeconfig: Path,
) -> None:
    rights = can_i_list(kubeconfig, "fivespot-provider-composite")
    for plural in ("capitalmarketsschedules", "compositeschedules", "manualschedules",
                   "timebasedspotschedules"):
        assert rights[f"{plural}.{GROUP}"] == {"get", "list", "watch"}, plural
    assert rights[f"compositeschedules.{GROUP}/status"] == {"get", "patch", "update"}
    writable = {resource for resource, verbs in rights.items()
                if verbs & {"create", "update", "patch", "delete", "deletecollection", "*"}
                and not resource.startswith("selfsubject")}
    assert writable == {f"compositeschedules.{GROUP}/status", "events.events.k8s.io"}


def test_the_preview_reads_a_live_clusters_schedules_and_agrees_with_their_published_status(
    providers: dict[str, Manager], kubeconfig: Path, schedules: Schedules,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from fivespot.cli.main import main

    on, office, desk = unique("on"), unique("office"), unique("desk")
    schedules.create("ManualSchedule", on, {"enabled": False})
    schedules.create("TimeBasedSpotSchedule", office, ALWAYS)
    schedules.create("CompositeSchedule", desk, {"allOf": [ref("TimeBasedSpotSchedule", office),
                                                           {"not": ref("ManualSchedule", on)}]})
    published = schedules.wait(desk, lambda s: _ready(s).get("status") == "True", "ready")
    assert main(["schedule", "preview", "--kubeconfig", str(kubeconfig), "-n", NS, "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    mine = next(s for s in report["schedules"] if s["name"] == desk)
    assert mine["kind"] == "CompositeSchedule" and mine["problem"] is None
    assert mine["now"]["state"] == ("active" if published["active"] else "inactive") == "active"
