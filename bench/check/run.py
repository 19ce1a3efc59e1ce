"""Benchmark: the offline checker's throughput through all agent-sandbox policies, on one core.

Not a test. It compiles the bundled example, builds a fixed-seed corpus of varied
ScheduledCapacity objects (mostly valid, a fifth with one boundary mutation, a fifth as UPDATE
pairs), and measures:

1. objects/s through `Checker.check` (decode, prune, default, schema, CRD rules, every bound
   ValidatingAdmissionPolicy) pinned to one CPU: several sets of timed runs over the corpus,
   each run measured both in wall-clock time and in the process's CPU time. On a quiet machine
   the two agree; on a shared, loaded one the wall clock also counts the time other processes
   hold the CPU, so the CPU-time rate is what "on one core" means there. Both are reported,
   with the load average before and after;
2. µs per rule: each CEL rule of the example (CRD rules, VAP variables and validations) alone
   over the corpus, compiled once (cel-expr-python, through `fivespot.policies.cel`);
3. the same rules through pure-Python `cel-python` (celpy) for the ratio; rules celpy cannot
   evaluate (no `join`/`split`, for example) are listed and left out of the ratio.

Prints the results and replaces the checker's section of bench/RESULTS.md, keeping its
hand-written `### ` subsections (comparisons, earlier runs) after the new numbers.

    .venv/bin/python bench/check/run.py [--objects 2000] [--runs 7] [--sets 3] [--no-write]
"""

from __future__ import annotations

import argparse
import copy
import datetime
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fivespot.compiler.pipeline import compile_repo  # noqa: E402
from fivespot.policies.admission_eval import Checker, Request  # noqa: E402
from fivespot.policies.admission_eval.vap import _cel_request  # noqa: E402
from fivespot.policies.cel import ADMISSION_VARIABLES, CRD_VARIABLES, CelEvaluationError, Program, compile_expression  # noqa: E402
from fivespot.policies.cel import authz  # noqa: E402
from fivespot.policies import kubeversions  # noqa: E402

EXAMPLE = ROOT / "examples" / "agent-sandbox" / "config"
RESULTS = ROOT / "bench" / "RESULTS.md"
SEED = 20_260_101

BASE: dict[str, Any] = {
    "apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
    "metadata": {"name": "warm-pool", "namespace": "agents"},
    "spec": {
        "schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                     "kind": "TimeBasedSpotSchedule", "name": "business-hours"},
        "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                      "kind": "VirtualMachinePool", "name": "sandboxes"},
        "capacity": {"path": "spec.warmReplicas", "activeValue": 8},
        "handback": {"drainedPath": "status.inUse", "timeout": "15m"},
    },
}

MUTATIONS: list[tuple[tuple[str, ...], Any]] = [
    (("spec", "capacity", "path"), "spec..x"), (("spec", "capacity", "path"), "metadata.labels"),
    (("spec", "capacity", "activeValue"), 11), (("spec", "capacity", "activeValue"), -1),
    (("spec", "schedule", "kind"), "CronSchedule"), (("spec", "schedule", "apiVersion"), "batch/v1"),
    (("spec", "handback", "timeout"), "200h"), (("metadata", "namespace"), "team-b"),
    (("spec", "targetRef", "kind"), "Deployment"), (("spec", "nodeName"), "Bad_Node"),
]


def corpus(size: int) -> list[Request]:
    rng = random.Random(SEED)
    requests = []
    for index in range(size):
        obj = copy.deepcopy(BASE)
        obj["metadata"]["name"] = f"pool-{index}"
        obj["spec"]["targetRef"]["name"] = f"sandboxes-{rng.randrange(1000)}"
        obj["spec"]["schedule"]["name"] = f"hours-{rng.randrange(1000)}"
        obj["spec"]["capacity"]["activeValue"] = rng.randrange(0, 11)
        obj["spec"]["handback"]["timeout"] = f"{rng.randrange(1, 120)}m"
        if rng.random() < 0.3:
            obj["spec"]["nodeName"] = f"node-{rng.randrange(50)}.example"
        roll = rng.random()
        if roll < 0.2:
            path, value = rng.choice(MUTATIONS)
            cursor = obj
            for part in path[:-1]:
                cursor = cursor[part]
            cursor[path[-1]] = value
        old = None
        if 0.2 <= roll < 0.4:
            old = copy.deepcopy(obj)
            obj["spec"]["enabled"] = False
        requests.append(Request("UPDATE" if old else "CREATE", obj, old))
    return requests


def pin_to_one_core() -> str:
    try:
        cpu = sorted(os.sched_getaffinity(0))[-1]
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}"
    except (AttributeError, OSError):
        return "not pinned (no sched_setaffinity)"


def timed(function: Callable[[], object], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return times


def timed_both(function: Callable[[], object], runs: int) -> list[tuple[float, float]]:
    """(wall-clock seconds, CPU seconds of this process) of each run."""
    times = []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        function()
        times.append((time.perf_counter() - wall, time.process_time() - cpu))
    return times


def spread(rates: list[float]) -> str:
    """`median N (min A, max B)` of objects/s figures."""
    ordered = sorted(rates)
    return f"median {statistics.median(ordered):,.0f} (min {ordered[0]:,.0f}, max {ordered[-1]:,.0f})"


def rules(checker: Checker) -> list[tuple[str, str, frozenset[str], Callable[[Request], dict[str, Any]]]]:
    """(label, expression, variables, activation builder) for every CEL rule of the example."""
    found = []
    kind = checker.kinds[("5spot.finos.org/v1alpha1", "ScheduledCapacity")]

    def walk(node: Any, path: tuple[str, ...]) -> None:
        for rule in node.rules:
            def activation(request: Request, path: tuple[str, ...] = path) -> dict[str, Any]:
                value: Any = request.object
                for part in path:
                    value = value.get(part) if isinstance(value, dict) else None
                return {"self": value}
            found.append((f"crd {'.'.join(path)}", rule.rule, CRD_VARIABLES, activation))
        for name, child in (node.properties or {}).items():
            walk(child, path + (name,))

    walk(kind.schema, ())
    params = next(iter(checker.policies.params.values()))[0]
    for policy in checker.policies.policies.values():
        variables: dict[str, Any] = {}
        for variable in policy.variables:
            found.append((f"vap {policy.name} var {variable.name}", variable.program.expression,
                          ADMISSION_VARIABLES, lambda r, p=policy: _activation(r, p, params)))
        for validation in policy.validations:
            found.append((f"vap {policy.name}", validation.expression, ADMISSION_VARIABLES,
                          lambda r, p=policy: _activation(r, p, params)))
        del variables
    return found


def _activation(request: Request, policy: Any, params: Any) -> dict[str, Any]:
    obj = request.object
    data: dict[str, Any] = {
        "object": obj, "oldObject": request.old_object, "params": params if policy.param_kind else None,
        "request": _cel_request({"namespace": obj["metadata"].get("namespace", ""), "operation": request.operation}),
        "namespaceObject": None, "authorizer": authz.ASSUMED, "variables": {},
    }
    for variable in policy.variables:
        try:
            data["variables"][variable.name] = variable.program.evaluate(data)
        except CelEvaluationError:
            pass
    return data


def per_rule(requests: list[Request], checker: Checker) -> list[tuple[str, float, float | None]]:
    import celpy

    environment = celpy.Environment()
    rows = []
    for label, expression, variables, build in rules(checker):
        activations = [build(r) for r in requests]
        program: Program = compile_expression(expression, variables)

        def ours() -> None:
            for activation in activations:
                try:
                    program.evaluate(activation)
                except CelEvaluationError:
                    pass

        ours_us = min(timed(ours, 3)) / len(activations) * 1e6
        celpy_us: float | None
        try:
            compiled = environment.program(environment.compile(expression))
            converted = [{k: celpy.json_to_cel(v) for k, v in a.items() if v is not None}
                         for a in activations]
            compiled.evaluate(converted[0])
            failures = 0

            def theirs() -> None:
                nonlocal failures
                for activation in converted:
                    result = compiled.evaluate(activation)
                    failures += isinstance(result, celpy.CELEvalError)

            celpy_us = min(timed(theirs, 1)) / len(converted) * 1e6
            if failures == len(converted):
                celpy_us = None
        except Exception:  # noqa: BLE001 - celpy raises many kinds for unsupported functions
            celpy_us = None
        rows.append((f"{label}: {expression[:60]}", ours_us, celpy_us))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--sets", type=int, default=3, help="sets of --runs timed runs")
    parser.add_argument("--no-write", action="store_true", help="do not append to bench/RESULTS.md")
    args = parser.parse_args()

    pinned = pin_to_one_core()
    compiled = compile_repo(EXAMPLE)
    checker = Checker.compile((a.obj for a in compiled.artifacts), server=kubeversions.DEFAULT)
    requests = corpus(args.objects)
    denied = sum(not checker.check(r).allowed for r in requests)

    def all_objects() -> None:
        for request in requests:
            checker.check(request)

    load_before = os.getloadavg()
    all_objects()  # warm up
    sets = [timed_both(all_objects, args.runs) for _ in range(args.sets)]
    load_after = os.getloadavg()
    wall_sets = [[len(requests) / wall for wall, _ in runs] for runs in sets]
    cpu_sets = [[len(requests) / cpu for _, cpu in runs] for runs in sets]
    wall_medians = [statistics.median(rates) for rates in wall_sets]
    cpu_medians = [statistics.median(rates) for rates in cpu_sets]
    median = statistics.median(cpu_medians)
    rule_rows = per_rule(requests[:500], checker)
    supported = [(o, c) for _, o, c in rule_rows if c is not None]
    ratio = sum(c for _, c in supported) / sum(o for o, _ in supported) if supported else float("nan")
    cel_rules = len(rule_rows)
    per_object_us = 1e6 / median

    load = (f"load average {', '.join(f'{x:.2f}' for x in load_before)} before, "
            f"{', '.join(f'{x:.2f}' for x in load_after)} after, on {os.cpu_count()} CPUs")
    lines = [
        f"objects: {len(requests)} ({denied} denied, {sum(r.operation == 'UPDATE' for r in requests)} UPDATE); "
        f"{args.sets} sets of {args.runs} runs; {pinned}; {load}",
        "",
        "| set | objects/s, CPU time of the pinned process | objects/s, wall clock |",
        "|---:|---|---|",
        *(f"| {index + 1} | {spread(cpu)} | {spread(wall)} |"
          for index, (cpu, wall) in enumerate(zip(cpu_sets, wall_sets))),
        f"| all | {spread([r for rates in cpu_sets for r in rates])}; median of set medians "
        f"{statistics.median(cpu_medians):,.0f} | {spread([r for rates in wall_sets for r in rates])}; "
        f"median of set medians {statistics.median(wall_medians):,.0f} |",
        "",
        f"throughput on one core (CPU time): {median:,.0f} objects/s, {per_object_us:.0f} µs per object "
        f"(wall clock: {statistics.median(wall_medians):,.0f} objects/s)",
        f"per object: {cel_rules} CEL rules of the example (CRD rules, VAP variables and validations) "
        f"+ schema; {per_object_us / cel_rules:.1f} µs per rule amortised",
        "",
        "| rule | cel-expr-python µs/eval | celpy µs/eval | ratio |",
        "|---|---:|---:|---:|",
    ]
    for label, ours_us, celpy_us in rule_rows:
        theirs = f"{celpy_us:.1f}" if celpy_us is not None else "unsupported"
        factor = f"{celpy_us / ours_us:.0f}×" if celpy_us is not None else "-"
        lines.append(f"| `{label}` | {ours_us:.1f} | {theirs} | {factor} |")
    lines.append("")
    lines.append(f"celpy / cel-expr-python over the {len(supported)} rules celpy can evaluate: "
                 f"{ratio:.0f}× slower")
    report = "\n".join(lines)
    print(report)
    if not args.no_write:
        header = (f"## Offline checker (`bench/check/run.py`), {datetime.date.today().isoformat()}\n\n"
                  f"Machine: {platform.node()}, {platform.processor() or platform.machine()}, "
                  f"{os.cpu_count()} CPUs, Python {platform.python_version()}.\n"
                  f"Command: `.venv/bin/python bench/check/run.py --objects {args.objects} "
                  f"--runs {args.runs} --sets {args.sets}`\n\n")
        existing = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
        RESULTS.write_text(replace_section(existing, header + report + "\n"))
        print(f"\nwrote the checker's section of {RESULTS.relative_to(ROOT)}")
    return 0


SECTION: Final = "## Offline checker (`bench/check/run.py`)"
KEPT: Final = "\n### "


def replace_section(text: str, section: str, heading: str = SECTION) -> str:
    """`text` with the section starting `heading` replaced by `section` (appended if there is
    none); the old section's `### ` subsections (written by hand) are kept at the end of the new
    one."""
    start = text.find(heading)
    if start < 0:
        return text.rstrip("\n") + "\n\n" + section
    end = text.find("\n## ", start + len(heading))
    end = len(text) if end < 0 else end + 1
    old = text[start:end]
    earlier = old[old.find(KEPT) + 1:].rstrip("\n") + "\n" if KEPT in old else ""
    new = section.rstrip("\n") + "\n" + (f"\n{earlier}" if earlier else "")
    return text[:start] + new + ("\n" + text[end:] if end < len(text) else "")


if __name__ == "__main__":
    sys.exit(main())
