"""The upstream provider guide, followed literally, against the real API server and the real
machine controller, in the two situations a platform can be in:

- fivespot's built-in ManualSchedule is *not* installed: the guide's own CRD (kind ManualSchedule)
  is the user's, declared in the config repo as `crd: external` so that consumers may read it;
- the built-in *is* installed: `fivespot compile` refuses a custom kind of that name (a unit
  test), so the guide is followed with a kind of the user's own, DeskToggle, as
  `examples/provider-guide/` ships it.

Each runs steps 1 (CRD), 3 (RBAC), 4 (the provider: the example's `provider.sh`, a shell loop with
kubectl, running as the guide's ServiceAccount), 5 (a ScheduledMachine referencing it, then the
toggle flipped) and 6 (the Verify commands) as the guide writes them, then holds the provider
contract to what the guide says a consumer does: a provider publishing `active` alone resolves;
`active` with Ready=False is unresolved, and the machine's last state is held.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from fivespot.devcluster import localrun
from fivespot.devcluster.clients import service_account_kubeconfig
from fivespot.devcluster.kubectl import kubectl, wait_established
from fivespot.runtime import kube
from tests.integration.capacity_world import eventually, unique
from tests.integration.machine_world import NS, World, config_with, machine_world

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "examples" / "provider-guide"
GROUP = "spotschedules.5spot.finos.org"


@dataclass(frozen=True)
class Names:
    """A provider kind's names, as the guide's files spell them."""

    kind: str
    plural: str
    singular: str
    short: str
    provider: str
    """The provider's ServiceAccount, ClusterRole and binding."""

    def text(self, file: str) -> str:
        """`examples/provider-guide/FILE`, written for this kind (the example uses DeskToggle)."""
        text = (GUIDE / file).read_text()
        for ours, theirs in ((OWN.plural, self.plural), (OWN.singular, self.singular),
                             (OWN.kind, self.kind), (OWN.provider, self.provider),
                             (f'shortNames: ["{OWN.short}"]', f'shortNames: ["{self.short}"]')):
            text = text.replace(ours, theirs)
        return text


OWN = Names("DeskToggle", "desktoggles", "desktoggle", "dt", "desk-toggle-provider")
THE_GUIDES = Names("ManualSchedule", "manualschedules", "manualschedule", "ms",
                   "manual-schedule-provider")


def test_the_guide_as_written_when_the_builtin_manual_schedule_is_not_installed(
        tmp_path: Path) -> None:
    config = config_with(tmp_path, f"""
apiVersion: config.5spot.finos.org/v1alpha1
kind: ScheduleProvider
metadata: {{name: builtin}}
spec:
  custom:
    - kind: {THE_GUIDES.kind}
      crd: external
""")
    with machine_world(tmp_path, config) as world:
        assert "manualschedules" not in kubectl(world.kubeconfig, "get", "crd", "-o", "name")
        _follow_the_guide(world, THE_GUIDES, tmp_path)


def test_the_guide_with_a_kind_of_ones_own_beside_the_builtin_manual_schedule(
        tmp_path: Path) -> None:
    config = config_with(tmp_path, (GUIDE / "scheduleprovider.yaml").read_text() + """
---
apiVersion: config.5spot.finos.org/v1alpha1
kind: ScheduleProvider
metadata: {name: compiled}
spec:
  custom:
    - kind: FreezeWindow
      specSchema: {type: object, properties: {frozen: {type: boolean}}}
""", keep_builtin=True)
    with machine_world(tmp_path, config) as world:
        assert "/manualschedules.spotschedules.5spot.finos.org" in kubectl(
            world.kubeconfig, "get", "crd", "-o", "name"), "the built-in is installed"
        _follow_the_guide(world, OWN, tmp_path)
        _a_compiled_custom_kind_takes_a_status_of_active_alone(world)


# --- the guide's steps -------------------------------------------------------------------------


def _follow_the_guide(world: World, names: Names, work: Path) -> None:
    kc = world.kubeconfig
    # 1. Define the CRD.
    kubectl(kc, "apply", "-f", "-", stdin=names.text("crd.yaml"))
    wait_established(kc, [f"{names.plural}.{GROUP}"])
    # 3. Grant least privilege.
    kubectl(kc, "apply", "-f", "-", stdin=names.text("rbac.yaml"))
    as_provider = service_account_kubeconfig(kc, localrun.INSTALL_NAMESPACE, names.provider,
                                             work / "provider.kubeconfig")
    assert _can(kc, names, "patch", f"{names.plural}.{GROUP}", "--subresource=status")
    assert not _can(kc, names, "patch", f"{names.plural}.{GROUP}")
    assert not _can(kc, names, "get", "scheduledmachines.5spot.finos.org")
    # 4. Deploy the controller: the example's shell loop, as the provider's ServiceAccount.
    provider = _start_provider(as_provider, names, work / "provider.log")
    try:
        # 5. Reference it from a ScheduledMachine, then flip the toggle.
        kubectl(kc, "apply", "-f", "-", stdin=names.text("scheduledmachine.yaml")
                .replace("clusterName: desk-cluster", f"clusterName: {world.cluster}"))
        eventually(lambda: _resolved(kc, "trading-desk-rack") == (True, False, "Resolved"), 60,
                   "resolved, inactive: the provider published active=false")
        assert world.status("trading-desk-rack")["phase"] == "Inactive"
        assert world.machine("trading-desk-rack") is None
        kubectl(kc, "-n", NS, "patch", names.singular, "desk-override", "--type=merge",
                "-p", '{"spec":{"enabled":true}}')
        eventually(lambda: world.machine("trading-desk-rack"), 60, "the Machine")
        # 6. Verify: the provider published its decision ...
        eventually(lambda: kubectl(kc, "-n", NS, "get", names.singular, "desk-override", "-o",
                                   'jsonpath={.status.active}{"\\n"}').strip() == "true",
                   60, "status.active true")
        published = kube.request(world.api, "GET", _path(names, "desk-override"))
        assert published["status"]["observedGeneration"] == published["metadata"]["generation"]
        # ... and 5-Spot resolved it.
        eventually(lambda: _resolved(kc, "trading-desk-rack") == (True, True, "Resolved"), 60,
                   "spotSchedule resolved and active")
    finally:
        os.killpg(provider.pid, signal.SIGTERM)
        provider.wait(15)
    _the_contract_as_a_minimal_provider_meets_it(world, names, as_provider)


def _the_contract_as_a_minimal_provider_meets_it(world: World, names: Names,
                                                 as_provider: Path) -> None:
    """`status.active` alone is the contract; Ready other than True holds the last state."""
    toggle, rack = unique("minimal"), unique("rack")
    kube.request(world.api, "POST", _path(names), body={
        "apiVersion": f"{GROUP}/v1alpha1", "kind": names.kind, "metadata": {"name": toggle},
        "spec": {"enabled": True}})
    kubectl(world.kubeconfig, "apply", "-f", "-", stdin=names.text("scheduledmachine.yaml")
            .split("---", 1)[1].replace("trading-desk-rack", rack).replace("desk-override", toggle)
            .replace("clusterName: desk-cluster", f"clusterName: {world.cluster}"))
    kubectl(as_provider, "-n", NS, "patch", names.plural, toggle, "--subresource=status",
            "--type=merge", "-p", '{"status":{"active":true}}')
    eventually(lambda: world.machine(rack), 60, "the Machine of a provider publishing active alone")
    assert _resolved(world.kubeconfig, rack) == (True, True, "Resolved")
    kubectl(as_provider, "-n", NS, "patch", names.plural, toggle, "--subresource=status",
            "--type=merge", "-p", '{"status":{"active":false,"conditions":[{"type":"Ready",'
            '"status":"False","reason":"Stale","message":"the toggle service is down"}]}}')
    held = eventually(lambda: (s := world.status(rack))["spotSchedule"]["resolved"] is False and s,
                      60, "unresolved on Ready=False")
    assert held["spotSchedule"]["reason"] == "ScheduleNotReady"
    assert "the toggle service is down" in held["spotSchedule"]["message"]
    assert held["inSchedule"] is True and world.machine(rack) is not None, "the last state is held"


def _a_compiled_custom_kind_takes_a_status_of_active_alone(world: World) -> None:
    names = Names("FreezeWindow", "freezewindows", "freezewindow", "", "")
    window = unique("freeze")
    kube.request(world.api, "POST", _path(names), body={
        "apiVersion": f"{GROUP}/v1alpha1", "kind": "FreezeWindow", "metadata": {"name": window},
        "spec": {"frozen": False}})
    answer = kube.merge_patch(world.api, _path(names, window, "status"), {"status": {"active": False}})
    assert answer["status"] == {"active": False}
    kube.merge_patch(world.api, _path(names, window, "status"), {"status": {
        "active": True, "providerSpecific": {"ticket": "CHG-1"}}})
    kept = kube.request(world.api, "GET", _path(names, window))["status"]
    assert kept == {"active": True, "providerSpecific": {"ticket": "CHG-1"}}, "extra fields are kept"


def _start_provider(kubeconfig: Path, names: Names, log_file: Path) -> subprocess.Popen[bytes]:
    with open(log_file, "ab") as log:
        return subprocess.Popen(["bash", str(GUIDE / "provider.sh"), names.plural],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "KUBECONFIG": str(kubeconfig)})


def _can(kubeconfig: Path, names: Names, *args: str) -> bool:
    answer = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "auth", "can-i", *args, "-n", NS,
         f"--as=system:serviceaccount:{localrun.INSTALL_NAMESPACE}:{names.provider}"],
        capture_output=True, text=True, timeout=30)
    return answer.stdout.strip() == "yes"


def _resolved(kubeconfig: Path, name: str) -> tuple[object, object, object]:
    raw = kubectl(kubeconfig, "-n", NS, "get", "scheduledmachine", name, "-o",
                  'jsonpath={.status.spotSchedule}{"\\n"}').strip()
    spot = json.loads(raw) if raw else {}
    return spot.get("resolved"), spot.get("active"), spot.get("reason")


def _path(names: Names, name: str | None = None, sub: str | None = None) -> str:
    return kube.resource_path(GROUP, "v1alpha1", names.plural, namespace=NS, name=name,
                              subresource=sub)
