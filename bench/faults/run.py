"""Benchmark: recovery from each fault the suite injects, over several rounds (not a test).

Runs `tests/integration/test_faults.py` and `test_faults_webhook.py` with
FIVESPOT_FAULT_ROUNDS=N (each fault repeated N times on the same control plane) and collects the
`recovery: <fault> <seconds>` lines they print:

- apiserver-restart-mid-flip: from kube-apiserver ready again to every target of a 40-object flip
  right (bound: lease duration + 5 s);
- kill-switch-after-restart: a kill switch update sent right after a restart, until admitted;
- handback-across-restart: from ready again to Inactive on the drain counter read after it;
- apiserver-pause-past-lease: from resumption (paused lease + 2 s, two replicas) to every target
  of a flip right;
- etcd-compaction-410: from ready again (watches resumed from a compacted revision) to all 21
  changes acted on;
- webhook-down-write-failed-reported / -write-lands-after-restart: the status telling a refused
  write, and the write landing once the webhook answers.

    .venv/bin/python bench/faults/run.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    found: dict[str, list[float]] = {}
    # test_faults.py repeats each fault itself (FIVESPOT_FAULT_ROUNDS, one control plane); the
    # webhook's faults are repeated by running their module again.
    plan = (("tests/integration/test_faults.py", args.rounds, 1),
            ("tests/integration/test_faults_webhook.py", 1, args.rounds))
    for module, rounds, runs in plan:
        for _ in range(runs):
            answer = subprocess.run(
                [sys.executable, "-m", "pytest", "-m", "integration", "-q", "-s", "-p",
                 "no:cacheprovider", module], cwd=ROOT, capture_output=True, text=True,
                env={**os.environ, "FIVESPOT_FAULT_ROUNDS": str(rounds)})
            if answer.returncode != 0:
                print(answer.stdout[-3000:], answer.stderr[-2000:], file=sys.stderr)
                return 1
            for line in answer.stdout.splitlines():
                if line.startswith("recovery: ") or ".recovery: " in line:
                    _, fault, seconds = line[line.index("recovery: "):].split()
                    found.setdefault(fault, []).append(float(seconds))
    load = os.getloadavg()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}; load {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}")
    print("| fault | runs | recovery s, median | max |")
    print("|---|---:|---:|---:|")
    for fault, values in found.items():
        print(f"| {fault} | {len(values)} | {statistics.median(values):.2f} | {max(values):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
