"""Benchmark: `fivespot check` as a user runs it, the whole process, beside its peers.

Not a test. It compiles the bundled example, writes object files of 1, 2,000 and 10,000
ScheduledCapacity objects (the fixed-seed corpus of `bench/check/run.py`: mostly valid, a fifth
with one boundary mutation), and in one run measures:

1. `fivespot check --policies OUT FILE` started afresh each time (interpreter start-up, imports,
   reading and compiling the policies, reading the file, deciding, printing): several runs after
   a warm-up, wall clock and CPU time (user + system of the process and its workers), median and
   spread, hyperfine-style. The warm-up fills the check cache (`fivespot.compiler.check.cache`, in the
   run's own folder), as a user's first run after compiling does; one object is also measured
   with `--no-cache` (the first run after a policy change);
0. the limit, in the same run: the interpreter alone (`python -c pass`, the same venv), and a
   bare process that imports the libraries `check` stands on and reads every document of the
   same file with rapidyaml and json (no checks, no positions): what no Python checker of this
   file can go below;
2. kubectl-validate (`sigs.k8s.io/kubectl-validate` v0.0.4, its only release, built from Go
   modules, `bench/check/kubectl-validate/go.mod`; it does not compile against the control
   plane's 1.35 libraries, so it is built on the 1.30 ones it was released with) on the same
   files with the same CRDs (`--local-crds`): the CRD layer only, no ValidatingAdmissionPolicies;
3. the real kube-apiserver's own server-side dry-run create of the same objects, from one client
   over one keep-alive connection (bodies serialised beforehand), with the same CRDs and policies
   installed: objects/s.

Prints the results and replaces the section `## fivespot check, whole process` of
bench/RESULTS.md (`--no-write` to leave it). Run it with nothing else busy on the machine (the
load averages before and after are recorded with the results):

    .venv/bin/python bench/check/cli.py [--runs 7] [--no-write]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from bench.check.run import corpus, replace_section  # noqa: E402
from fivespot.compiler.output import write_tree  # noqa: E402
from fivespot.compiler.pipeline import compile_repo  # noqa: E402

EXAMPLE: Final = ROOT / "examples" / "agent-sandbox" / "config"
CONSUMER_CRD: Final = ROOT / "examples" / "agent-sandbox" / "consumer" / "virtualmachinepools.yaml"
RESULTS: Final = ROOT / "bench" / "RESULTS.md"
SECTION: Final = "## fivespot check, whole process (`bench/check/cli.py`)"
KUBECTL_VALIDATE_MODULE: Final = ROOT / "bench" / "check" / "kubectl-validate"
SIZES: Final = (1, 2000, 10000)
BARE_READER: Final = (
    "import json, re, sys, re2, yaml, ryml, cel_expr_python.cel\n"
    "text = open(sys.argv[1], encoding='utf-8').read()\n"
    "parts = re.split(r'(?m)^---(?=[ \\t]|$)', text)\n"
    "objects = [json.loads(ryml.emit_json(ryml.parse_in_arena(p.encode()))) for p in parts if p.strip()]\n"
    "print(len(objects))\n"
)
"""The limit for reading a file of objects: the libraries imported, each document parsed."""


def timed_process(argv: Sequence[str], runs: int, warmup: int = 1,
                  env: dict[str, str] | None = None) -> list[tuple[float, float]]:
    """(wall seconds, CPU seconds of the process and its children) of each run."""
    # as a user's install has it: bytecode written on the first (warm-up) run and used after
    env = {k: v for k, v in (env or os.environ).items() if k != "PYTHONDONTWRITEBYTECODE"}
    found = []
    for index in range(warmup + runs):
        start = time.perf_counter()
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   env=env)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode not in (0, 1):
            raise RuntimeError(f"{argv[0]} exited {process.returncode}: {' '.join(argv)}")
        if index >= warmup:
            found.append((wall, usage.ru_utime + usage.ru_stime))
    return found


def spread(values: Sequence[float], unit: str = "s") -> str:
    ordered = sorted(values)
    return (f"{statistics.median(ordered):.3f} {unit} (min {ordered[0]:.3f}, "
            f"max {ordered[-1]:.3f})")


def build_kubectl_validate(build: bool = True) -> Path | None:
    """The kubectl-validate binary, built once into the cache (None without Go, or when it is
    not built yet and `build` is False)."""
    target = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "fivespot" / "bench" / "kubectl-validate"
    if target.exists():
        return target
    if shutil.which("go") is None or not build:
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["go", "build", "-o", str(target), "sigs.k8s.io/kubectl-validate"],
                   cwd=KUBECTL_VALIDATE_MODULE, check=True)
    return target


def dry_run_rate(out: Path, objects: list[dict[str, Any]]) -> tuple[float, int, float]:
    """(objects/s, objects sent, seconds) of sequential server-side dry-run creates."""
    from fivespot.devcluster.build import cached_binaries, ensure_binaries
    from fivespot.devcluster.clients import admin_client
    from fivespot.devcluster.controlplane import ControlPlane
    from kubernetes import client, dynamic

    plane = ControlPlane(cached_binaries() or ensure_binaries(), owned=True)
    plane.start()
    try:
        api = admin_client(plane.kubeconfig)
        installed = [d for p in sorted(out.rglob("*.yaml")) for d in yaml.safe_load_all(p.read_text())
                     if isinstance(d, dict)]
        installed += [d for d in yaml.safe_load_all(CONSUMER_CRD.read_text()) if isinstance(d, dict)]
        dyn = dynamic.DynamicClient(api)
        crds = [d for d in installed if d.get("kind") == "CustomResourceDefinition"]
        for crd in crds:
            _apply(dyn, crd)
        extensions = client.ApiextensionsV1Api(api)
        for crd in crds:
            _until(lambda name=crd["metadata"]["name"]: any(
                c.type == "Established" and c.status == "True"
                for c in extensions.read_custom_resource_definition(name).status.conditions or []))
        dyn = dynamic.DynamicClient(api)
        admission = sorted((d for d in installed if d.get("kind") in (
            "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "TenantCapacityLimit")),
            key=lambda d: d["kind"] != "TenantCapacityLimit")
        for obj in admission:
            _until(lambda obj=obj: _apply(dyn, obj) or True)
        core = client.CoreV1Api(api)
        for name in sorted({o["metadata"]["namespace"] for o in objects}):
            core.create_namespace({"metadata": {"name": name,
                                                "labels": {"fivespot.example/tenant": "true"}}})
        time.sleep(5)  # let the policy informers see the bindings
        pool = api.rest_client.pool_manager
        headers = {"Content-Type": "application/json", **api.default_headers}
        bodies = [(f"{api.configuration.host}/apis/5spot.finos.org/v1alpha1/namespaces/"
                   f"{o['metadata']['namespace']}/scheduledcapacities?dryRun=All&fieldValidation=Strict",
                   json.dumps(o).encode()) for o in objects]
        for url, body in bodies[:50]:  # warm-up: connection, caches
            pool.request("POST", url, body=body, headers=headers)
        start = time.perf_counter()
        for url, body in bodies:
            pool.request("POST", url, body=body, headers=headers)
        elapsed = time.perf_counter() - start
        return len(bodies) / elapsed, len(bodies), elapsed
    finally:
        plane.stop()


def _apply(dyn: Any, obj: dict[str, Any]) -> None:
    resource = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    namespace = obj["metadata"].get("namespace") if resource.namespaced else None
    resource.server_side_apply(body=obj, name=obj["metadata"]["name"], namespace=namespace,
                               field_manager="fivespot-bench", force_conflicts=True)


def _until(check: Any, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - not served yet
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise TimeoutError("the control plane did not get ready")
        time.sleep(0.5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--dry-run-objects", type=int, default=2000)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--no-build", action="store_true",
                        help="leave kubectl-validate out unless it is already built")
    args = parser.parse_args()

    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="fivespot-bench-check-"))
    out = work / "out"
    write_tree(compile_repo(EXAMPLE).files, out)
    crds = work / "crds"
    crds.mkdir()
    for path in sorted((out / "crds").glob("*.yaml")):
        shutil.copy(path, crds / path.name)
    shutil.copy(CONSUMER_CRD, crds / CONSUMER_CRD.name)
    objects = [request.object for request in corpus(max(SIZES))]
    for index, obj in enumerate(objects):  # a config repo's: one governor per pool and field
        obj["spec"]["targetRef"]["name"] = f"sandboxes-{index}"
    files = {}
    for size in SIZES:
        files[size] = work / f"objects-{size}.yaml"
        files[size].write_text(yaml.safe_dump_all(objects[:size], sort_keys=False))

    fivespot = str(ROOT / ".venv" / "bin" / "fivespot")
    python = str(ROOT / ".venv" / "bin" / "python")
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache")}  # check cache: this run's own
    env.pop("FIVESPOT_CACHE_DIR", None)
    rows = []

    def measure(label: str, size: int, argv: list[str], runs: int) -> None:
        times = timed_process(argv, runs, env=env)
        rows.append((label, size, [w for w, _ in times], [c for _, c in times]))

    measure("limit: `python -c pass` (the interpreter, this venv)", 1, [python, "-c", "pass"],
            args.runs)
    for size in SIZES:
        plural = "s" if size > 1 else ""
        runs = args.runs if size < 10000 else max(3, args.runs // 2)
        measure(f"limit: bare reader (libraries imported, rapidyaml + json), {size:,} "
                f"object{plural}", size, [python, "-c", BARE_READER, str(files[size])], runs)
        measure(f"`fivespot check`, {size:,} object{plural}", size,
                [fivespot, "check", "--policies", str(out), str(files[size])], runs)
        if size == 1:
            measure("`fivespot check --no-cache`, 1 object (first run after a policy change)",
                    1, [fivespot, "check", "--no-cache", "--policies", str(out), str(files[1])],
                    args.runs)
    validate = build_kubectl_validate(build=not args.no_build)
    if validate is not None:
        for size in SIZES[:2]:
            times = timed_process([str(validate), "--local-crds", str(crds), str(files[size])],
                                  args.runs)
            rows.append((f"kubectl-validate, {size:,} object{'s' if size > 1 else ''}", size,
                         [w for w, _ in times], [c for _, c in times]))
    rate, sent, elapsed = dry_run_rate(out, objects[:args.dry_run_objects])
    load_after = os.getloadavg()

    lines = [
        "| command | wall clock, median (min, max) | CPU (user+sys) | objects/s (median wall) |",
        "|---|---|---|---:|",
    ]
    for label, size, walls, cpus in rows:
        lines.append(f"| {label} | {spread(walls)} | {spread(cpus)} | "
                     f"{size / statistics.median(walls):,.0f} |")
    if validate is None:
        lines.append("| kubectl-validate | not built in this run | - | - |")
    lines.append(f"| kube-apiserver server-side dry-run create, one client, {sent:,} objects | "
                 f"{elapsed:.3f} s | - | {rate:,.0f} |")
    check_2k = next(statistics.median(w) for label, size, w, _ in rows
                    if size == 2000 and label.startswith("`fivespot check`"))
    lines += ["", f"`fivespot check` on 2,000 objects vs the API server's dry-run from one client: "
              f"{2000 / check_2k / rate:.1f}× its rate"]
    medians = {size: statistics.median(w) for label, size, w, _ in rows
               if label.startswith("`fivespot check`,")}
    targets = [
        ("1 object ≤ 0.3 s", medians[1] <= 0.3, f"{medians[1]:.3f} s"),
        ("2,000 objects in one file ≤ 0.6 s", medians[2000] <= 0.6, f"{medians[2000]:.3f} s"),
        ("10,000 objects ≥ 6,000 objects/s", 10000 / medians[10000] >= 6000,
         f"{10000 / medians[10000]:,.0f} objects/s"),
        ("≥ 10× the API server's dry-run rate from one client (2,000 objects)",
         2000 / check_2k >= 10 * rate, f"{2000 / check_2k / rate:.1f}×"),
    ]
    lines += ["", "| target (issue 14, whole process, median wall clock) | measured | holds |",
              "|---|---|---|"]
    lines += [f"| {name} | {value} | {'yes' if held else 'no'} |" for name, held, value in targets]
    load = (f"load average {', '.join(f'{x:.2f}' for x in load_before)} before, "
            f"{', '.join(f'{x:.2f}' for x in load_after)} after, on {os.cpu_count()} CPUs")
    report = "\n".join([load, "", *lines])
    print(report)
    if not args.no_write:
        header = (f"{SECTION}, {datetime.date.today().isoformat()}\n\n"
                  f"Machine: {platform.node()}, {platform.processor() or platform.machine()}, "
                  f"{os.cpu_count()} CPUs, Python {platform.python_version()}. Command: "
                  f"`.venv/bin/python bench/check/cli.py --runs "
                  f"{args.runs}`. Objects: the fixed-seed corpus of `bench/check/run.py` (a fifth "
                  f"denied), one YAML file each size; each `fivespot check` run is a fresh process "
                  f"after one warm-up run.\n\n")
        existing = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
        RESULTS.write_text(replace_section(existing, header + report + "\n", SECTION))
        print(f"\nwrote the section of {RESULTS.relative_to(ROOT)}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
