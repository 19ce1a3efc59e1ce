"""`make demo` (`python -m fivespot.devcluster.demo`): `fivespot dev` on the agent-sandbox example, plus a
scripted tenant that walks one ScheduledCapacity through a whole handback.

Everything up to the tenant is `fivespot dev examples/agent-sandbox/config --crd
examples/agent-sandbox/consumer/virtualmachinepools.yaml` (fivespot/devcluster/dev.py: a local control
plane, the compiled output installed, every component a local process with its compiled
identity, the webhook by URL). Then it flips a ManualSchedule and prints `kubectl get scap` and
the VirtualMachinePool's warmReplicas at every step: Active -> HandingBack (0 written, counter
still 3) -> Inactive -> Active again. Then the other pattern, side by side on the same session
(`fivespot/devcluster/machine_demo.py`): the config repo also declares the trading desk's
MachineProvisioning, so `dev` runs the machine controller too, and a ScheduledMachine's CAPI
Machine is created when its schedule opens, then drained (cordon, evictions, a
PodDisruptionBudget, nodeDrainTimeout) and deleted when it closes, with a second control plane
as the workload cluster. `tests/integration/test_demo.py` runs it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from fivespot.devcluster.dev import DevSession
from fivespot.devcluster.machine_demo import CAPI_CRDS, MACHINES, MachineStory
from fivespot.devcluster.narration import say, wait
from fivespot.runtime import kube

ROOT: Final = Path(__file__).resolve().parents[2]
EXAMPLE: Final = ROOT / "examples" / "agent-sandbox"
NS = "agents"
POOL, SCHEDULE, SCAP = "demo-pool", "demo-window", "demo-capacity"


def _path(group: str, plural: str, name: str | None = None, sub: str | None = None) -> str:
    return kube.resource_path(group, "v1alpha1", plural, NS, name, sub)


class Tenant:
    """The scripted tenant: its pool, its schedule, its ScheduledCapacity."""

    def __init__(self, session: DevSession) -> None:
        self.session = session
        self.api = session.api

    def show(self) -> None:
        from fivespot.devcluster.kubectl import kubectl

        assert self.session.kubeconfig is not None
        print(kubectl(self.session.kubeconfig, "-n", NS, "get", "scap", SCAP).rstrip())
        pool = kube.request(self.api, "GET", _path("pools.agents.example.com", "virtualmachinepools", POOL))
        print(f"   VirtualMachinePool {POOL}: spec.warmReplicas={pool['spec'].get('warmReplicas')} "
              f"status.inUse={(pool.get('status') or {}).get('inUse')}")

    def phase(self) -> Any:
        scap = kube.request(self.api, "GET", _path("5spot.finos.org", "scheduledcapacities", SCAP))
        return (scap.get("status") or {}).get("phase")

    def flip(self, enabled: bool) -> None:
        path = _path("spotschedules.5spot.finos.org", "manualschedules", SCHEDULE)
        kube.merge_patch(self.api, path, {"spec": {"enabled": enabled}})
        print(f"   kubectl -n {NS} patch manualschedule {SCHEDULE} --type=merge "
              f"-p '{{\"spec\":{{\"enabled\":{str(enabled).lower()}}}}}'")

    def in_use(self, count: int) -> None:
        path = _path("pools.agents.example.com", "virtualmachinepools", POOL, "status")
        kube.merge_patch(self.api, path, {"status": {"inUse": count}})
        print(f"   (the consumer reports status.inUse={count})")

    def create(self) -> None:
        kube.request(self.api, "POST", _path("pools.agents.example.com", "virtualmachinepools"), body={
            "apiVersion": "pools.agents.example.com/v1alpha1", "kind": "VirtualMachinePool",
            "metadata": {"name": POOL}, "spec": {"warmReplicas": 0}})
        self.in_use(0)
        kube.request(self.api, "POST", _path("spotschedules.5spot.finos.org", "manualschedules"), body={
            "apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "ManualSchedule",
            "metadata": {"name": SCHEDULE}, "spec": {"enabled": False}})
        kube.request(self.api, "POST", _path("5spot.finos.org", "scheduledcapacities"), body={
            "apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
            "metadata": {"name": SCAP},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": SCHEDULE},
                     "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                                   "kind": "VirtualMachinePool", "name": POOL},
                     "capacity": {"path": "spec.warmReplicas", "activeValue": 10},
                     "handback": {"drainedPath": "status.inUse", "timeout": "10m"}}})


def story(tenant: Tenant) -> bool:
    """The handback, step by step; True when every step reached its phase."""
    say("a tenant's objects in namespace agents")
    tenant.create()
    reached = [wait(lambda: tenant.phase() is not None, 30, "the first reconcile")]
    tenant.show()
    def close() -> None:
        tenant.in_use(3)
        tenant.flip(False)

    steps: list[tuple[str, Callable[[], None], str]] = [
        ("the window opens", lambda: tenant.flip(True), "Active"),
        ("the window closes: 0 is written first, then the drain is awaited", close, "HandingBack"),
        ("the consumer drains its last sandboxes", lambda: tenant.in_use(0), "Inactive"),
        ("reopening works at any time: the value is simply written again",
         lambda: tenant.flip(True), "Active"),
    ]
    for title, act, phase in steps:
        say(title)
        act()
        reached.append(wait(lambda: tenant.phase() == phase, 20, phase))
        tenant.show()
    return all(reached)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fivespot.devcluster.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="keep the work folder with the logs")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="fivespot-demo-"))
    config = work / "config"
    config.mkdir()
    for source in sorted((EXAMPLE / "config").glob("*.yaml")) + [MACHINES]:
        shutil.copy(source, config / source.name)
    say("fivespot dev on examples/agent-sandbox/config + examples/trading-desk/config/machines.yaml "
        "(local control plane, components as processes)")
    crds = [EXAMPLE / "consumer" / "virtualmachinepools.yaml", *sorted(CAPI_CRDS.glob("*.yaml"))]
    session = DevSession(config, work, crds, report=lambda line: print(f"   {line}", flush=True))
    machines = MachineStory(session, work)
    try:
        session.start()
        capacity = story(Tenant(session))
        return 0 if machines.run() and capacity else 1
    finally:
        session.stop()
        machines.stop()
        if args.keep:
            print(f"\nlogs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
