"""`make demo` runs: the agent-sandbox example through `fivespot dev`, a whole handback, then a
ScheduledMachine's Machine created, drained past a PodDisruptionBudget and deleted."""

from __future__ import annotations

import re
import subprocess
import sys

from fivespot.runtime.processes import die_with_parent


def test_make_demo_walks_a_scheduled_capacity_through_a_whole_handback_and_a_machine_through_a_drain(
) -> None:
    done = subprocess.run([sys.executable, "-m", "fivespot.devcluster.demo"], capture_output=True, text=True,
                          timeout=600, preexec_fn=die_with_parent)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    out = done.stdout
    assert "still waiting" not in out, out
    steps = ["the window opens", "the window closes", "the consumer drains", "reopening works"]
    order = [out.index(step) for step in steps]
    assert order == sorted(order)
    closes, drains, reopens = order[1], order[2], order[3]
    assert "HandingBack" in out[closes:drains] and "Inactive" in out[drains:reopens]
    assert "Active" in out[reopens:]
    assert "spec.warmReplicas=10" in out and "spec.warmReplicas=0" in out
    # The other pattern, side by side: the ScheduledMachine's Machine comes and goes.
    machine = out.index("the other pattern: a ScheduledMachine")
    assert machine > reopens
    rest = out[machine:]
    steps = ["the schedule opens", "the schedule closes"]
    opens, closes = (rest.index(step) for step in steps)
    assert re.search(r"trading-desk-rack\s+Active\s+True\s+true", rest[opens:closes]), rest
    assert "ShuttingDown" in rest[closes:] and "SchedulingDisabled" in rest[closes:]
    assert "did not drain within nodeDrainTimeout 15s (still running: desk-apps/db)" in rest
