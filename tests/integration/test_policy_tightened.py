"""A TenantPolicy tightened under objects already stored, against the real API server and the real
capacity controller.

The agent-sandbox example is installed with tenant `agents` allowed up to 10; ScheduledCapacities
are created and go Active; then the platform team lowers the limit to 5 and the output is
installed again (as a GitOps sync would). Then:
- admission ratchets: disabling, the kill switch, a lower value and a label edit of a stored
  object over the new limit are admitted; raising its value or changing its target is denied
  with the policy's own message — and `fivespot check --old` gives the same verdicts and whole
  Status as the server;
- the controller: the target never gets a value above the new limit once the policy is in the
  cluster (a watch on the targets from that revision, and the controller's own audit log); the
  object is handed back to 0 and says why (Stalled=True/OutOfPolicy naming the TenantPolicy and
  the limit); lowered to comply, it is Active again at the new value.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from devcluster import localrun
from devcluster.clients import admin_client
from devcluster.controlplane import ControlPlane
from runtime import kube
from tests.integration.capacity_world import (
    POOLS,
    SCAP,
    ControllerProcess,
    History,
    World,
    current_revision,
    eventually,
    path,
    unique,
)
from tests.integration.conftest import own_control_plane

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent-sandbox" / "config"
NS = "agents"


Change = Callable[[dict[str, Any]], Any]


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    with own_control_plane() as own:
        yield own


@pytest.fixture(scope="module")
def admin(plane: ControlPlane) -> Iterator[client.ApiClient]:
    api = admin_client(plane.kubeconfig)
    yield api
    api.close()


def config_with_limit(work: Path, limit: int) -> Path:
    config = work / f"config-{limit}"
    shutil.copytree(EXAMPLE, config)
    tenants = config / "tenants.yaml"
    documents = list(yaml.safe_load_all(tenants.read_text()))
    for document in documents:
        if document and document.get("metadata", {}).get("name") == "agents":
            document["spec"]["maxActiveValue"] = limit
    tenants.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return config


@pytest.fixture(scope="module")
def tightened(plane: ControlPlane, admin: client.ApiClient,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Objects created under the limit 10, Active; then the limit lowered to 5 and installed."""
    work = tmp_path_factory.mktemp("tightened")
    bundle = localrun.compile_and_install(plane.kubeconfig, work / "out-10", config_with_limit(work, 10))
    sa = localrun.controller_kubeconfig(plane.kubeconfig, work / "controller.kubeconfig")
    controller = ControllerProcess(sa, bundle, unique("tighten"), work / "controller.log").start()
    controller.wait_leading("default", "agents")
    world = World(admin)
    world.schedule("open", True)
    for name, value in (("over", 8), ("under", 4)):
        world.pool(name)
        world.scap(name, "open", name, value)
        world.wait_phase(name, "Active", 60)
    assert world.warm("over") == 8
    since = current_revision(admin, POOLS)
    history = History(admin, POOLS, since)
    localrun.compile_and_install(plane.kubeconfig, work / "out-5", config_with_limit(work, 5))
    in_force = current_revision(admin, POOLS)
    try:
        yield {"world": world, "out": work / "out-5", "controller": controller,
               "history": history, "in_force": int(in_force), "work": work}
    finally:
        history.stop()
        controller.terminate()


def update(admin: client.ApiClient, name: str, change: Change) -> tuple[bool, dict[str, Any]]:
    """A server-side dry-run update of the stored object with `change` applied: (allowed, Status)."""
    stored = kube.request(admin, "GET", path(SCAP, name, ns=NS))
    new = copy.deepcopy(stored)
    change(new)
    try:
        kube.request(admin, "PUT", path(SCAP, name, ns=NS), body=new,
                     query={"dryRun": "All", "fieldValidation": "Strict"})
    except kube.ApiError as error:
        return False, dict(error.body)
    return True, {}


def checked(out: Path, stored: dict[str, Any], new: dict[str, Any], work: Path) -> dict[str, Any]:
    """`fivespot check --old` on the same pair, as a tenant's CI would run it."""
    old_file, new_file = work / "old.yaml", work / "new.yaml"
    for file, obj in ((old_file, stored), (new_file, new)):
        file.write_text(yaml.safe_dump(_as_written(obj)))
    answer = subprocess.run([sys.executable, "-m", "fivespot", "check", "--policies", str(out),
                             str(new_file), "--old", str(old_file), "-o", "json"],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert answer.returncode in (0, 1), answer.stderr
    (result,) = json.loads(answer.stdout)["results"]
    return dict(result)


def _as_written(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    kept = {k: meta[k] for k in ("name", "namespace", "labels") if k in meta}
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": kept,
            "spec": obj["spec"]}


CHANGES: dict[str, tuple[bool, Change]] = {
    "disable": (True, lambda o: o["spec"].update(enabled=False)),
    "kill switch": (True, lambda o: o["spec"].update(killSwitch=True)),
    "a lower value, still over": (True, lambda o: o["spec"]["capacity"].update(activeValue=7)),
    "a label edit": (True, lambda o: o["metadata"].setdefault("labels", {}).update(team="a")),
    "a higher value": (False, lambda o: o["spec"]["capacity"].update(activeValue=9)),
    "another target": (False, lambda o: o["spec"]["targetRef"].update(name="under")),
}


@pytest.mark.parametrize("what", sorted(CHANGES))
def test_an_update_of_an_object_over_the_lowered_limit_is_admitted_unless_it_makes_it_worse(
        tightened: dict[str, Any], admin: client.ApiClient, what: str) -> None:
    expected, change = CHANGES[what]
    allowed, status = update(admin, "over", change)
    assert allowed is expected, status
    stored = kube.request(admin, "GET", path(SCAP, "over", ns=NS))
    new = copy.deepcopy(stored)
    change(new)
    result = checked(tightened["out"], stored, new, tightened["work"])
    assert result["allowed"] is allowed
    if not allowed:
        ours = result["status"]
        assert (ours["code"], ours["reason"], ours["message"]) == (
            status["code"], status["reason"], status["message"]), "check says what the server says"
        assert "of TenantPolicy agents" in ours["message"] or "fivespot-" in ours["message"]


def test_a_new_object_over_the_lowered_limit_is_denied(tightened: dict[str, Any]) -> None:
    world: World = tightened["world"]
    with pytest.raises(kube.ApiError) as denied:
        world.scap(unique("new"), "open", "under", 6)
    assert "exceeds the limit 5 of TenantPolicy agents; set it to at most 5" in denied.value.message


def test_the_controller_writes_nothing_above_the_lowered_limit_and_says_why(
        tightened: dict[str, Any]) -> None:
    world: World = tightened["world"]
    history: History = tightened["history"]
    eventually(lambda: world.warm("over") == 0, 60, "the object over the limit handed back to 0")
    stalled = eventually(lambda: (c := world.condition("over", "Stalled")).get("reason") == "OutOfPolicy"
                         and c, 60, "Stalled=True/OutOfPolicy")
    assert "exceeds the limit 5 of TenantPolicy agents" in stalled["message"]
    assert world.phase("over") in ("HandingBack", "Inactive")
    assert world.warm("under") == 4 and world.phase("under") == "Active", "within the limit: untouched"
    # Lowered to comply (always admitted), it is Active again at the new value.
    kube.merge_patch(world.api, path(SCAP, "over", ns=NS), {"spec": {"capacity": {"activeValue": 5}}})
    world.wait_phase("over", "Active", 60)
    assert world.warm("over") == 5
    in_force: int = tightened["in_force"]
    over_the_limit = [(rv, obj["spec"].get("warmReplicas")) for rv, _, obj in history.of("over")
                      if rv > in_force and (obj["spec"].get("warmReplicas") or 0) > 5]
    assert over_the_limit == [], "no value above the new limit after it was in the cluster"
    writes = [e["value"] for e in tightened["controller"].writes()
              if e.get("target", "").endswith("/over") and int(e["resource_version"]) > in_force]
    assert writes and all(value <= 5 for value in writes), writes
