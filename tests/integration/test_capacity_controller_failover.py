"""Partition failover between two controller processes, against the real API server.

A campaigns for partition `agents` only and leads it; B campaigns for both and leads `default`,
standing by for `agents`. While a schedule in `agents` flips every half second, A is killed with
SIGKILL (no lease release). B must take `agents` over within lease duration + 2 s, and the
write logs (each process logs every target write with its identity) must show that no target was
written by both at once: every write by A precedes B's takeover, every write by B in `agents`
follows it. Both replicas run as the same ServiceAccount, so managedFields cannot tell them
apart; the per-identity write log is the audit. Then a graceful SIGTERM hands `agents` back quickly because the lease is released.
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


def started_leading(process: ControllerProcess, partition: str) -> list[float]:
    return [ts(e) for e in process.entries()
            if e.get("msg") == "started leading" and e.get("partition") == partition]


def test_killing_a_partition_leader_hands_it_over_within_lease_duration_plus_2s_without_double_writes(
    kubeconfig: Path, admin: client.ApiClient, tmp_path: Path
) -> None:
    bundle = localrun.compile_and_install(kubeconfig, tmp_path / "out")
    sa = localrun.controller_kubeconfig(kubeconfig, tmp_path / "sa.kubeconfig")
    a = ControllerProcess(sa, bundle, unique("replica-a"), tmp_path / "a.log", partitions=("agents",))
    b = ControllerProcess(sa, bundle, unique("replica-b"), tmp_path / "b.log",
                          partitions=("agents", "default"))
    world = World(admin)
    schedule, pools = unique("ms"), [unique("pool") for _ in range(3)]
    names = [unique("cap") for _ in pools]
    world.schedule(schedule, True)
    for name, pool in zip(names, pools):
        world.pool(pool)
        world.scap(name, schedule, pool, 6)
    a.start()
    a.wait_leading("agents", timeout=30)  # takes over from earlier tests' replicas if needed
    b.start()
    b.wait_leading("default", timeout=30)
    for pool in pools:
        eventually(lambda: world.warm(pool) == 6, 30, "A concedes capacity")

    with flipping(world, schedule):
        time.sleep(1.5)
        killed_at = time.time()
        a.kill()
        took = eventually(lambda: started_leading(b, "agents"), LEASE_DURATION_S + 10, "B takes agents")[0]
        failover_s = took - killed_at
        print(f"\nfailover after SIGKILL: {failover_s:.2f} s (lease duration {LEASE_DURATION_S:.0f} s)")
        assert failover_s <= LEASE_DURATION_S + 2.0
        eventually(lambda: [w for w in b.writes() if w["partition"] == "agents"], 30, "B writes in agents")

    a_writes = [w for w in a.writes() if w["partition"] == "agents"]
    b_writes = [w for w in b.writes() if w["partition"] == "agents"]
    assert a_writes, "A wrote while it led"
    assert max(ts(w) for w in a_writes) < took <= min(ts(w) for w in b_writes)
    for pool in pools:
        by_a = [ts(w) for w in a_writes if w["target"].endswith(pool)]
        by_b = [ts(w) for w in b_writes if w["target"].endswith(pool)]
        assert not by_a or not by_b or max(by_a) < min(by_b), f"{pool} saw interleaved writers"

    # Graceful: A comes back standing by; B's SIGTERM releases the lease; A needs no expiry wait.
    a.start()
    time.sleep(1.0)
    released_at = time.time()
    b.terminate()
    took_back = eventually(lambda: [t for t in started_leading(a, "agents") if t > released_at],
                           LEASE_DURATION_S + 5, "A takes agents back")[0]
    print(f"handover after SIGTERM (lease released): {took_back - released_at:.2f} s")
    assert took_back - released_at < 2.0
    a.terminate()

