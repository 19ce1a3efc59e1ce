"""YAML that would stall or crash the reader is refused on its line: alias bombs, merge bombs,
many documents each expanding far, deep nesting, integers longer than Python converts, files
over the size limit; by `compile`/`test`, by `check`, by `install` and by `compile --check`'s
read of the previous output alike (except that `check` reads a number as kubectl does, for which
no integer is that long). A bomb is refused before it is expanded, wherever in a file it stands:
it costs a whole process less than half a second of CPU more than a one-line mistake does (the
same command, on the same machine, in the same test), where expanding it would take minutes."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fivespot.commandline.yamlbounds import MAX_FILE_BYTES
from fivespot.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent-sandbox" / "config"
PLATFORM = ("apiVersion: config.5spot.finos.org/v1alpha1\nkind: Platform\n"
            "metadata: {name: p}\nspec:\n  image: example.com/fivespot:test\n")
FIXTURE = ("apiVersion: config.5spot.finos.org/v1alpha1\nkind: Fixture\nmetadata: {name: f}\n"
           "spec: {operation: CREATE, object: {apiVersion: v1, kind: ConfigMap, metadata: {name: c}},"
           " expect: {allowed: true}}\n---\n")
"""A Fixture first: its file is read a second time, as kubectl reads manifests (issue 36, F2)."""


def _bomb(levels: int = 12, width: int = 12) -> str:
    lines = ["a0: &a0 [lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def _merge_bomb(levels: int = 30) -> str:
    """A mapping merged twice into the next, `levels` times: about 1 KB that a merge (`<<`)
    built anew each time would take 2**levels steps to read (30: an hour)."""
    lines = ["a0: &a0 {k: 1}"]
    lines += [f"a{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}]}}" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def _many_documents(count: int = 1000) -> str:
    """`count` documents of about 170 bytes, each expanding to some 90,000 values, under the
    limit of one document: 90 million values in all, unless the file's documents share one."""
    lists = ["a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lists += [f"{name}: &{name} [{', '.join([f'*{previous}'] * 10)}]"
              for previous, name in zip("abc", "bcd")]
    document = "\n".join([*lists, f"e: [{', '.join(['*d'] * 7)}]"]) + "\n"
    return "---\n".join([document] * count)


EXPANDS = "refused: the document expands to more than 100,000 values (aliases that refer to aliases?)"
FILE_BUDGET = ("refused: the file's aliases and merge keys expand to more than 100,000 values, its "
               "documents up to this one together")
BOMBS = {
    # where the document that expands starts, and what is said there
    "merge bomb after a fixture": (FIXTURE + _merge_bomb(), f"6:1: {EXPANDS}"),
    "alias bomb after a fixture": (FIXTURE + _bomb(), f"6:1: {EXPANDS}"),
    "many documents": (_many_documents(), f"7:1: {FILE_BUDGET}"),
}


def _run(argv: list[str], tmp_path: Path, stdin: bytes | None = None
         ) -> tuple[subprocess.CompletedProcess[bytes], float, float]:
    """`fivespot ARGV` as a process of its own: its result, its CPU seconds (user + system:
    what it costs, whatever else the machine runs) and its wall-clock seconds. A process that
    takes a minute has failed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "fivespot", *argv], capture_output=True,
                          input=stdin, timeout=60, cwd=ROOT,
                          env={**os.environ, "FIVESPOT_CACHE_DIR": str(tmp_path / "cache")})
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return done, cpu, wall


DEEP = "x: " + "[" * 500 + "]" * 500 + "\n"
"""A one-line mistake every reader refuses at once (nested too deep): the baseline of a bomb."""

BOMB_CPU_S = 0.5
"""What a bomb may cost a process over the baseline. A CI runner's CPU time swings with what
else it runs, so the bound is on the difference of two runs side by side, not on one run."""


def _over_the_baseline(argv: list[str], bad: Path, text: str, tmp_path: Path
                       ) -> tuple[subprocess.CompletedProcess[bytes], float, str]:
    """`fivespot ARGV` with `bad` holding `text`: its result, the CPU seconds it took more than
    the same command with `bad` holding DEEP, and both figures to print if it fails."""
    bad.write_text(DEEP)
    plain, baseline, _ = _run(argv, tmp_path)
    assert plain.returncode == 2, plain.stderr.decode()
    bad.write_text(text)
    done, cpu, wall = _run(argv, tmp_path)
    return done, cpu - baseline, f"{cpu:.2f} s of CPU ({wall:.2f} s wall) against {baseline:.2f} s"


def _bytes_read() -> int:
    """What this process has read so far (Linux's `rchar`: every read(2), cached or not)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


CASES = {
    "bomb": (_bomb(), "bad.yaml:1:1: refused: the document expands to more than 100,000 values "
                      "(aliases that refer to aliases?)"),
    # libyaml itself stops at 1,000 levels ("invalid YAML: exceeded maximum nesting depth").
    "deep": (DEEP, "bad.yaml:1:103: refused: nested more than 100 levels deep"),
    "digits": ("n: " + "9" * 5000 + "\n", "bad.yaml:1:4: refused: an integer of 5,000 digits; at most 4,300"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_compile_and_test_refuse_it_on_its_line(case: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    text, expected = CASES[case]
    (tmp_path / "platform.yaml").write_text(PLATFORM)
    (tmp_path / "bad.yaml").write_text(text)
    for argv in (["compile", str(tmp_path), "--out", str(tmp_path.parent / "out")],
                 ["test", str(tmp_path)]):
        assert main(argv) == 2
        assert capsys.readouterr().err.splitlines()[0] == expected


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("policies") / "out"
    assert main(["compile", str(EXAMPLE), "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("case", sorted(set(CASES) - {"digits"}))
def test_check_refuses_it_on_its_line(case: str, tmp_path: Path, policies: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    text, expected = CASES[case]
    (tmp_path / "bad.yaml").write_text(text)
    assert main(["check", "--policies", str(policies), str(tmp_path / "bad.yaml")]) == 2
    assert expected.replace("bad.yaml", str(tmp_path / "bad.yaml")) in capsys.readouterr().err


def test_check_reads_a_number_longer_than_python_converts_as_the_string_kubectl_sends(
        tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # go-yaml makes an integer past uint64 a float, and one past a float's range the text itself
    (tmp_path / "long.yaml").write_text(
        "apiVersion: 5spot.finos.org/v1alpha1\nkind: ScheduledCapacity\n"
        "metadata: {name: web, namespace: agents}\nspec:\n"
        "  schedule: {apiVersion: spotschedules.5spot.finos.org/v1alpha1, kind: ManualSchedule,"
        " name: m}\n  targetRef: {apiVersion: pools.agents.example.com/v1alpha1,"
        " kind: VirtualMachinePool, name: p}\n"
        f"  capacity: {{path: spec.warmReplicas, activeValue: {'9' * 5000}}}\n")
    assert main(["check", "--policies", str(policies), str(tmp_path / "long.yaml")]) == 1
    assert ('spec.capacity.activeValue: Invalid value: "string": spec.capacity.activeValue in body '
            'must be of type integer: "string"') in capsys.readouterr().out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(BOMBS))
def test_the_loader_refuses_a_bomb_anywhere_in_a_file_within_a_second(case: str,
                                                                       tmp_path: Path) -> None:
    from fivespot.compiler.loader import load_repo

    text, expected = BOMBS[case]
    (tmp_path / "platform.yaml").write_text(PLATFORM)
    (tmp_path / "bad.yaml").write_text(text)
    started = time.process_time()
    result = load_repo(tmp_path)
    assert time.process_time() - started < 1.0
    assert f"bad.yaml:{expected}" in [str(d) for d in result.diagnostics]


@pytest.mark.parametrize("command", ["compile", "test"])
@pytest.mark.parametrize("case", sorted(BOMBS))
def test_compile_and_test_refuse_a_bomb_for_little_more_than_a_one_line_mistake(
        case: str, command: str, tmp_path: Path) -> None:
    text, expected = BOMBS[case]
    config = tmp_path / "config"
    config.mkdir()
    (config / "platform.yaml").write_text(PLATFORM)
    argv = [command, str(config)] + (["--out", str(tmp_path / "out")] if command == "compile" else [])
    done, extra, figures = _over_the_baseline(argv, config / "bad.yaml", text, tmp_path)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert f"bad.yaml:{expected}" in err.splitlines()
    assert "Traceback" not in err
    assert extra < BOMB_CPU_S, figures
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case", ["merge bomb", "many documents"])
def test_check_refuses_a_bomb_for_little_more_than_a_one_line_mistake(
        case: str, tmp_path: Path, policies: Path) -> None:
    text, expected = {"merge bomb": (_merge_bomb(), f"1:1: {EXPANDS}"),
                      "many documents": BOMBS["many documents"]}[case]
    objects = tmp_path / "objects.yaml"
    done, extra, figures = _over_the_baseline(["check", "--policies", str(policies), str(objects)],
                                              objects, text, tmp_path)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert f"{objects}:{expected}" in err.splitlines()
    assert extra < BOMB_CPU_S, figures


def _output_with(tmp_path: Path, text: str) -> Path:
    """A compiled output whose kustomization lists one file holding `text`."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "kustomization.yaml").write_text("resources: [bad.yaml]\n")
    (out / "bad.yaml").write_text(text)
    return out


def _config_map(bomb: str) -> str:
    """A Kubernetes object whose data is `bomb`."""
    return ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n"
            + "".join(f"  {line}\n" for line in bomb.splitlines()))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", ["alias bomb", "merge bomb"])
def test_install_reads_its_output_within_the_bounds(case: str, tmp_path: Path) -> None:
    # PyYAML shares an alias's value, so an alias bomb loads at once, and then expands to
    # billions of values when the object is written as JSON for the API server
    from fivespot.deploy.manifests import OutputError, load

    out = _output_with(tmp_path, _config_map(_bomb() if case == "alias bomb" else _merge_bomb()))
    started = time.process_time()
    with pytest.raises(OutputError) as refused:
        load(out)
    assert str(refused.value) == f"bad.yaml:1:1: {EXPANDS}"
    assert time.process_time() - started < 1.0


def test_install_dry_run_refuses_an_alias_bomb_before_it_asks_a_cluster(tmp_path: Path) -> None:
    out = _output_with(tmp_path, "")
    done, extra, figures = _over_the_baseline(
        ["install", str(out), "--dry-run", "--kubeconfig", str(tmp_path / "no-kubeconfig")],
        out / "bad.yaml", _config_map(_bomb()), tmp_path)
    assert done.returncode == 2
    assert done.stderr.decode() == f"error: bad.yaml:1:1: {EXPANDS}\n"
    assert extra < BOMB_CPU_S, figures


@pytest.mark.timeout(60)
def test_compile_check_reads_the_previous_outputs_crds_within_the_bounds(tmp_path: Path) -> None:
    # The previous output is committed, so a pull request may change it. An integer longer than
    # Python converts made reading it a ValueError (`compile --check` exited 3, a fivespot bug);
    # a bomb in it is refused as anywhere else. A CRD file that cannot be read is named by its
    # file name.
    from fivespot.compiler.compile_warnings import dropped_crds

    previous = {"crds/long.yaml": f"spec: {{names: {{kind: {'9' * 5000}}}}}\n".encode(),
                "crds/aliases.yaml": _bomb().encode(), "crds/merges.yaml": _merge_bomb().encode()}
    started = time.process_time()
    warnings = dropped_crds(tmp_path, previous, {})
    assert time.process_time() - started < 1.0
    assert [w.message.split(".")[0] for w in warnings] == [
        f"the output no longer has the CRD {name} (kind {name})"
        for name in ("aliases", "long", "merges")]


def _sparse(path: Path, size: int) -> Path:
    """A file of `size` bytes that takes no room on disk (and nothing to write)."""
    with path.open("wb") as stream:
        stream.truncate(size)
    return path


def test_a_config_file_over_the_size_limit_is_refused_without_being_read(tmp_path: Path) -> None:
    from fivespot.compiler.loader import load_repo

    (tmp_path / "platform.yaml").write_text(PLATFORM)
    _sparse(tmp_path / "big.yaml", 64 * 1024 * 1024)
    before = _bytes_read()
    result = load_repo(tmp_path)
    assert _bytes_read() - before < MAX_FILE_BYTES
    assert [str(d) for d in result.diagnostics] == [
        "big.yaml:0:0: refused, not read: 67,108,864 bytes; fivespot reads files of at most "
        "10 MiB (10,485,760 bytes)"]


def test_check_refuses_an_object_file_over_the_size_limit_without_reading_it(
        tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = _sparse(tmp_path / "big.yaml", 64 * 1024 * 1024)
    before = _bytes_read()
    assert main(["check", "--policies", str(policies), "--no-cache", str(big)]) == 2
    assert _bytes_read() - before < MAX_FILE_BYTES
    assert capsys.readouterr().err.splitlines()[0] == (
        f"{big}:0:0: refused, not read: 67,108,864 bytes; fivespot reads files of at most 10 MiB "
        "(10,485,760 bytes)")


def test_check_reads_no_more_of_standard_input_than_the_size_limit(tmp_path: Path,
                                                                   policies: Path) -> None:
    done, _, _ = _run(["check", "--policies", str(policies), "-"], tmp_path,
                      stdin=b"#" * (MAX_FILE_BYTES + 1))
    assert done.returncode == 2
    assert done.stderr.decode().splitlines()[0] == (
        "STDIN:0:0: refused, not read: more bytes than that; fivespot reads files of at most "
        "10 MiB (10,485,760 bytes)")


def test_install_refuses_an_output_file_over_the_size_limit(tmp_path: Path) -> None:
    from fivespot.deploy.manifests import OutputError, load

    out = _output_with(tmp_path, "")
    _sparse(out / "bad.yaml", 64 * 1024 * 1024)
    with pytest.raises(OutputError, match="^bad.yaml: refused, not read: 67,108,864 bytes"):
        load(out)
