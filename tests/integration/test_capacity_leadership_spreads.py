"""Leadership spreads between two controller processes, against the real API server.

A starts alone and leads both partitions. B starts later (far more than the start-up spread
apart) and holds none, so it asks A for one; A hands `agents` back (it stops acting, lets its
in-flight work finish, then releases the lease naming B) and B takes it. While that happens a
schedule in `agents` flips every half second, and the per-identity write logs must show that no
target was written by both at once: every write by A in `agents` precedes B's taking over, every
write by B follows it. The spread then holds (one partition each, no further moves).
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

from kubernetes import client

from fivespot.devcluster import localrun
from tests.integration.capacity_world import ControllerProcess, World, eventually, flipping, unique

LEASE_DURATION_S = 4.0


def ts(entry: dict[str, object]) -> float:
    return datetime.fromisoformat(str(entry["ts"])).timestamp()


def log_times(process: ControllerProcess, msg: str, partition: str) -> list[float]:
    return [ts(e) for e in process.entries() if e.get("msg") == msg and e.get("partition") == partition]


def leads(process: ControllerProcess, partition: str) -> bool:
    status, body = localrun.http_get(process.port, "/metrics")
    return status == 200 and (
        f'fivespot_is_leader{{controller="fivespot-capacity-controller",partition="{partition}"}} 1.0'
        in body)


def test_a_replica_started_later_is_handed_one_of_two_partitions_without_double_writes(
    kubeconfig: Path, admin: client.ApiClient, tmp_path: Path
) -> None:
    bundle = localrun.compile_and_install(kubeconfig, tmp_path / "out")
    sa = localrun.controller_kubeconfig(kubeconfig, tmp_path / "sa.kubeconfig")
    both = ("agents", "default")
    a = ControllerProcess(sa, bundle, unique("spread-a"), tmp_path / "a.log", partitions=both)
    b = ControllerProcess(sa, bundle, unique("spread-b"), tmp_path / "b.log", partitions=both)
    world = World(admin)
    schedule, pools = unique("ms"), [unique("pool") for _ in range(3)]
    world.schedule(schedule, True)
    for pool in pools:
        world.pool(pool)
        world.scap(unique("cap"), schedule, pool, 6)
    a.start()
    a.wait_leading(*both, timeout=30)  # takes over from earlier tests' replicas if needed
    for pool in pools:
        eventually(lambda: world.warm(pool) == 6, 15, "A concedes capacity")

    with flipping(world, schedule):
        time.sleep(1.5)
        b_started = time.time()
        b.start()
        took = eventually(lambda: log_times(b, "started leading", "agents"), 45,
                          "B is handed agents")[0]
        print(f"\nB led agents {took - b_started:.2f} s after it started")
        eventually(lambda: [w for w in b.writes() if w["partition"] == "agents"], 15, "B writes in agents")

    eventually(lambda: leads(a, "default") and not leads(a, "agents"), 15, "A keeps default only")
    eventually(lambda: leads(b, "agents") and not leads(b, "default"), 15, "B leads agents only")
    released = [e for e in a.entries() if e.get("msg") == "released lease" and e.get("partition") == "agents"]
    assert released and released[-1].get("handed_to") == b.identity, released

    stopped = max(log_times(a, "stopped leading", "agents"))
    assert stopped <= took, "A stopped acting before B started"
    a_writes = [w for w in a.writes() if w["partition"] == "agents"]
    b_writes = [w for w in b.writes() if w["partition"] == "agents"]
    assert a_writes, "A wrote while it led"
    assert max(ts(w) for w in a_writes) <= took <= min(ts(w) for w in b_writes)
    for pool in pools:
        by_a = [ts(w) for w in a_writes if w["target"].endswith(pool)]
        by_b = [ts(w) for w in b_writes if w["target"].endswith(pool)]
        assert not by_a or not by_b or max(by_a) < min(by_b), f"{pool} saw interleaved writers"

    # The spread holds: one each, no lease moves again.
    settled = time.time()
    time.sleep(3 * LEASE_DURATION_S / 4)
    for process in (a, b):
        for partition in both:
            moved = [t for t in log_times(process, "started leading", partition) if t > settled]
            assert not moved, f"{process.identity} took {partition} again"
    b.terminate()
    a.terminate()
