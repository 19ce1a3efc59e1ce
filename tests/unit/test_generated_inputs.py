"""Thousands of generated broken inputs through `compile`, `test` and `check`: exit codes only 0, 1
or 2, never a traceback or an internal error, never a partial output.

The config repos are mutations (`tests/unit/mutations.py`, seeded) of a small repo that uses every
config kind: a Platform, a CapacityConsumer, built-in and custom providers with an exchange
calendar, a TenantPolicy and Fixtures of both verdicts and an UPDATE. Each repo goes through
`compile`, and through `test` when it compiles: `test` compiles the same way first, so a repo that
does not compile fails `test` with the same diagnostics, through the same code. The object files
for `check` are mutations of ScheduledCapacity, provider and params objects, some checked as
UPDATEs, against the example's compiled policies (loaded once: they are not what is mutated).
Every case runs in this process (the CLI's `main`), which keeps the thousands of them to tens of
seconds; the test prints how long each part took.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import random
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

import fivespot.compiler.check.objects
from fivespot.cli.main import main
from fivespot.compiler.ownership import MANIFEST, parse_manifest
from tests.unit.mutations import RepoMutator
from tests.unit.outtree import files_of

SEED: Final = 10
REPOS: Final = 2_000
SHARDS: Final = 2
OBJECT_FILES: Final = 1_000
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent-sandbox" / "config"
API: Final = "config.5spot.finos.org/v1alpha1"

_SCAP: Final[dict[str, Any]] = {
    "apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
    "metadata": {"name": "warm-pool", "namespace": "agents"},
    "spec": {
        "schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                     "kind": "TimeBasedSpotSchedule", "name": "business-hours"},
        "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                      "kind": "VirtualMachinePool", "name": "sandboxes"},
        "capacity": {"path": "spec.warmReplicas", "activeValue": 8},
        "handback": {"drainedPath": "status.inUse", "timeout": "15m"},
        "nodeName": "gpu-1",
    },
}


def _example(name: str) -> list[Any]:
    return [d for d in yaml.safe_load_all((EXAMPLE / name).read_text()) if d is not None]


def _fixture(name: str, expect: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Fixture", "metadata": {"name": name},
            "spec": {"operation": "CREATE", "object": _SCAP, **spec, "expect": expect}}


def base_repo() -> dict[str, list[Any]]:
    """A small valid repo that uses every config kind and most of their fields."""
    providers = _example("providers.yaml")
    providers[0]["spec"]["custom"] = [{
        "kind": "FreezeCalendarSchedule", "shortNames": ["fcs"],
        "specSchema": {"type": "object", "properties": {"frozenOn": {
            "type": "string", "maxLength": 10,
            "x-kubernetes-validations": [{"rule": "self.startsWith('2026-')",
                                          "message": "only 2026"}]}}}}]
    bigger = {**_SCAP, "spec": {**_SCAP["spec"], "capacity": {"path": "spec.warmReplicas",
                                                              "activeValue": 11}}}
    fixtures = [
        _fixture("allowed", {"allowed": True}),
        _fixture("over-limit-denied", {"allowed": False, "violations": [
            {"policy": "fivespot-tenant-limits", "field": "spec.capacity.activeValue",
             "message": "exceeds"}]}, object=bigger),
        _fixture("update-allowed", {"allowed": True}, operation="UPDATE", oldObject=_SCAP),
    ]
    return {"platform.yaml": _example("platform.yaml"), "consumers.yaml": _example("consumers.yaml"),
            "providers.yaml": providers, "tenants.yaml": _example("tenants.yaml"),
            "fixtures/cases.yaml": fixtures}


def _write(folder: Path, files: dict[str, bytes]) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    for relative, data in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_bytes(data)
    return folder


def _run(argv: list[str]) -> tuple[int, str]:
    """`fivespot ARGV` in this process: its exit code and stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


def _problem(case: str, code: int, err: str) -> str | None:
    """Why this outcome breaks the contract, or None."""
    if code not in (0, 1, 2):
        return f"{case}: exit {code}\n{err}"
    if "Traceback" in err or "internal error" in err:
        return f"{case}:\n{err}"
    return None


def _whole_or_nothing(case: str, code: int, out: Path) -> str | None:
    if code != 0:
        return f"{case}: exit {code} but {out} was written" if out.exists() else None
    listed = parse_manifest((out / MANIFEST).read_bytes())
    if listed is None or set(files_of(out)) != listed | {MANIFEST}:
        return f"{case}: {out} is not exactly what its manifest lists"
    return None


def _repo_cases(work: Path, shard: int) -> tuple[Counter[tuple[str, int]], list[str]]:
    """Run this shard's share of the generated repos (its own seed and folder)."""
    rng = random.Random(SEED * 1000 + shard)
    mutator = RepoMutator(base_repo())
    codes: Counter[tuple[str, int]] = Counter()
    problems: list[str] = []
    for index in range(REPOS // SHARDS):
        case = f"repo case {index} of shard {shard} (seed {SEED})"
        repo = _write(work / f"repo-{shard}", mutator.mutate(rng))
        out = work / f"out-{shard}"
        code, err = _run(["compile", str(repo), "--out", str(out)])
        problems += filter(None, [_problem(case, code, err), _whole_or_nothing(case, code, out)])
        codes["compile", code] += 1
        shutil.rmtree(out, ignore_errors=True)
        if code == 0:
            code, err = _run(["test", str(repo)])
            problems += filter(None, [_problem(case, code, err)])
            codes["test", code] += 1
    return codes, problems


# 2,000 whole compile+test runs: ~2 min on an idle 2-core machine, 8 min at load 10; the suite's
# 600 s hang guard is too tight for the latter.
@pytest.mark.timeout(1800)
def test_generated_config_repos_never_crash_compile_or_test_and_never_half_write(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = {name: yaml.safe_dump_all(docs).encode() for name, docs in base_repo().items()}
    assert _run(["compile", str(_write(tmp_path / "base", base)),
                 "--out", str(tmp_path / "base-out")])[0] == 0
    started = time.perf_counter()
    # Forked workers, one per core: each inherits this process's imports and warm caches.
    with multiprocessing.get_context("fork").Pool(SHARDS) as pool:
        shards = pool.starmap(_repo_cases, [(tmp_path, shard) for shard in range(SHARDS)])
    elapsed = time.perf_counter() - started
    codes = sum((c for c, _ in shards), Counter())
    problems = [p for _, found in shards for p in found]
    with capsys.disabled():
        print(f"\n{REPOS} generated repos through compile and test in {elapsed:.1f}s "
              f"({SHARDS} workers): {dict(sorted(codes.items()))}")
    assert not problems, "\n".join(problems[:5])
    # The generator must reach every outcome, or it tests less than it claims.
    assert {("compile", 0), ("compile", 2), ("test", 0), ("test", 1), ("test", 2)} <= set(codes)
    assert codes["compile", 0] > REPOS // 20, codes


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("policies") / "out"
    assert main(["compile", str(EXAMPLE), "--out", str(out)]) == 0
    return out


def _objects() -> dict[str, list[Any]]:
    manual = {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "ManualSchedule",
              "metadata": {"name": "m", "namespace": "agents"}, "spec": {"active": True}}
    limit = {"apiVersion": "5spot.finos.org/v1alpha1", "kind": "TenantCapacityLimit",
             "metadata": {"name": "agents"},
             "spec": {"consumers": [{"group": "pools.agents.example.com",
                                     "kind": "VirtualMachinePool"}], "maxActiveValue": 10}}
    return {"objects.yaml": [_SCAP, manual, limit]}


def test_generated_object_files_never_crash_check(
        policies: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = fivespot.compiler.check.objects.load_checker([policies])
    monkeypatch.setattr(fivespot.compiler.check.objects, "load_checker", lambda roots: loaded)
    rng = random.Random(SEED)
    base = _objects()
    mutator = RepoMutator(base)
    codes: Counter[int] = Counter()
    started = time.perf_counter()
    for index in range(OBJECT_FILES):
        case = f"object case {index} (seed {SEED})"
        objects = _write(tmp_path / "objects", mutator.mutate(rng))
        argv = ["check", "--policies", str(policies)]
        if rng.random() < 0.3:  # as an UPDATE of the unmutated objects
            old = _write(tmp_path / "old", {"old.yaml": yaml.safe_dump_all(base["objects.yaml"]).encode()})
            argv += ["--old", str(old / "old.yaml")]
        if rng.random() < 0.2:
            argv += ["-o", "json"]
        if rng.random() < 0.5:  # kubectl --validate=warn / false: unknown fields do not deny
            argv += ["--field-validation", rng.choice(["Warn", "Ignore"])]
        code, err = _run([*argv, str(objects / "objects.yaml")])
        problem = _problem(case, code, err)
        assert problem is None, problem
        codes[code] += 1
    elapsed = time.perf_counter() - started
    with capsys.disabled():
        print(f"\n{OBJECT_FILES} generated object files through check in {elapsed:.1f}s: "
              f"{dict(sorted(codes.items()))}")
    assert {0, 1, 2} <= set(codes)
