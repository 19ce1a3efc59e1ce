"""Benchmark: compile time of a config repo with N consumers and N tenant policies.

Not a test. Generates repos of 1k, 2k and 4k consumers (+ as many tenant policies, each in its
own namespace) into a temporary folder, then times `fivespot compile` end to end in-process
(load, check, emit, CEL compile + cost, render, write) a few times each. Target (docs/design/numbers.md):
1,000 + 1,000 in <= 5 s, and linear: doubling the input roughly doubles the time.

    .venv/bin/python bench/compile/run.py [--sizes 1000 2000 4000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path

from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo

PLATFORM = """apiVersion: config.5spot.finos.org/v1alpha1
kind: Platform
metadata: {name: bench}
spec:
  image: example.com/fivespot:bench
---
apiVersion: config.5spot.finos.org/v1alpha1
kind: ScheduleProvider
metadata: {name: builtin}
spec:
  builtin: [ManualSchedule, TimeBasedSpotSchedule, CapitalMarketsSchedule]
"""

CONSUMER = """apiVersion: config.5spot.finos.org/v1alpha1
kind: CapacityConsumer
metadata: {{name: pool-{i}}}
spec:
  group: pools{i}.example.com
  version: v1
  kind: Pool{i}
  resource: pool{i}s
  capacityPaths: [spec.warmReplicas]
  drainedPath: status.inUse
  maxActiveValue: 64
"""

TENANT = """apiVersion: config.5spot.finos.org/v1alpha1
kind: TenantPolicy
metadata: {{name: tenant-{i}}}
spec:
  namespaces: [team-{i}]
  consumers: [pool-{i}]
  maxActiveValue: 10
"""


def make_repo(folder: Path, size: int) -> None:
    folder.mkdir(parents=True)
    (folder / "platform.yaml").write_text(PLATFORM)
    (folder / "consumers.yaml").write_text("---\n".join(CONSUMER.format(i=i) for i in range(size)))
    (folder / "tenants.yaml").write_text("---\n".join(TENANT.format(i=i) for i in range(size)))


def measure(config: Path, out: Path, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        write_tree(compile_repo(config).files, out)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {platform.node()} {platform.machine()} python {platform.python_version()}")
    print("size  median_s  min_s  max_s  per_1k_s")
    with tempfile.TemporaryDirectory() as tmp:
        compile_repo(Path(__file__).resolve().parents[2] / "examples/agent-sandbox/config")  # warm imports
        for size in args.sizes:
            config = Path(tmp) / f"repo-{size}"
            make_repo(config, size)
            times = measure(config, Path(tmp) / f"out-{size}", args.repeats)
            median = statistics.median(times)
            print(f"{size:5d}  {median:8.2f}  {min(times):5.2f}  {max(times):5.2f}  "
                  f"{median / size * 1000:8.2f}", flush=True)


if __name__ == "__main__":
    main()
