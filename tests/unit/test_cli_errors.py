"""No traceback reaches a user from any entry point: an unexpected error is one line naming the
command, the exception and where it came from, with a documented exit code; `--debug` adds the
trace, and a process that logs JSON keeps the trace in its log record."""

from __future__ import annotations

import errno
import io
import json
import logging
import shutil
import threading
from pathlib import Path
from typing import Any, NoReturn

import pytest

import fivespot.compiler.output
import fivespot.compiler.pipeline
from fivespot.commandline import boundary, exitcodes
from fivespot.cli.main import main
from fivespot.compiler.output import with_manifest, write_tree
from fivespot.runtime import logs
from tests.unit.outtree import files_of

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent-sandbox" / "config"


def _explode(*args: Any, **kwargs: Any) -> NoReturn:
    raise ZeroDivisionError("division by zero")


@pytest.fixture()
def broken_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fivespot.compiler.pipeline, "compile_repo", _explode)


def test_an_unexpected_error_is_one_line_with_exit_3(
        broken_compiler: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", str(EXAMPLE), "--out", str(tmp_path / "out")]) == exitcodes.INTERNAL
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "fivespot compile: internal error: ZeroDivisionError: division by zero "
        "(at tests/unit/test_cli_errors.py:30 in _explode). This is a fivespot bug: run again "
        "with --debug for the trace and report it"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("where", ["after", "before"])
def test_debug_anywhere_on_the_line_adds_the_trace(
        broken_compiler: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:
    argv = ["compile", str(EXAMPLE), "--out", str(tmp_path / "out")]
    argv = [*argv, "--debug"] if where == "after" else ["--debug", *argv]
    assert main(argv) == exitcodes.INTERNAL
    err = capsys.readouterr().err
    assert err.startswith("fivespot compile: internal error: ZeroDivisionError")
    assert "Traceback (most recent call last)" in err
    assert err.rstrip().endswith("ZeroDivisionError: division by zero")


def test_a_full_disk_while_writing_is_exit_2_naming_the_path_and_keeps_the_old_output(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    write_tree({"README.md": b"the old output\n"}, out)

    def full(folder: Path, tree: Any) -> NoReturn:
        (folder / "crds").mkdir()
        raise OSError(errno.ENOSPC, "No space left on device", str(folder / "crds" / "x.yaml"))

    monkeypatch.setattr(fivespot.compiler.output, "_fill", full)
    assert main(["compile", str(EXAMPLE), "--out", str(out)]) == exitcodes.BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith(f"fivespot compile: {tmp_path}/.out.fivespot-")
    assert err.rstrip().endswith("/crds/x.yaml: No space left on device")
    assert files_of(out) == with_manifest({"README.md": b"the old output\n"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_ctrl_c_is_exit_130_without_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args: Any) -> NoReturn:
        raise KeyboardInterrupt

    monkeypatch.setattr(fivespot.compiler.pipeline, "compile_repo", interrupted)
    assert main(["compile", str(EXAMPLE), "--out", str(tmp_path / "out")]) == 130
    assert capsys.readouterr().err == "fivespot compile: interrupted\n"


def test_a_closed_stdout_pipe_is_exit_141_in_silence(capsys: pytest.CaptureFixture[str]) -> None:
    def closed() -> int:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    with capsys.disabled():
        code = boundary.run("fivespot check", closed)
    assert code == exitcodes.BROKEN_PIPE


def test_a_thread_that_dies_is_reported_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    def handler() -> int:
        worker = threading.Thread(target=_explode, name="worker-1")
        worker.start()
        worker.join()
        return 0

    assert boundary.run("controller capacity", handler) == 0
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "controller capacity (worker-1): internal error: ZeroDivisionError: division by zero "
        "(at tests/unit/test_cli_errors.py:30 in _explode). This is a fivespot bug: run again "
        "with --debug for the trace and report it"]


def test_a_process_that_logs_json_keeps_the_trace_in_the_log_record() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    logs.configure("info", stream)
    try:
        assert boundary.run("provider manual", lambda: _explode()) == exitcodes.INTERNAL
    finally:
        root.handlers[:], root.level = handlers, level
    [line] = stream.getvalue().splitlines()
    record = json.loads(line)
    assert record["level"] == "error"
    assert record["msg"].startswith("provider manual: internal error: ZeroDivisionError")
    assert "Traceback (most recent call last)" in record["exc"]


def _write_bundle(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    write_tree(fivespot.compiler.pipeline.compile_repo(EXAMPLE).files, out)
    return out / "bundle.json"


def test_every_long_running_entry_point_refuses_a_kubeconfig_that_does_not_load_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from collections.abc import Callable

    from fivespot.controllers.__main__ import main as controllers_main
    from fivespot.controllers.spotschedules.cli import main as providers_main
    from fivespot.webhook.cli import main as webhook_main

    bundle = _write_bundle(tmp_path)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("clusters: [\n")
    flags = ["--bundle", str(bundle), "--kubeconfig", str(kubeconfig)]
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        runs: tuple[Callable[[], int], ...] = (
            lambda: controllers_main(["capacity", *flags]),
            lambda: providers_main(["manual", *flags]),
            lambda: webhook_main(["serve", "--port", "0", *flags]),
            lambda: main(["controller", "capacity", *flags]),
            lambda: main(["provider", "time-based", *flags]))
        for run in runs:
            assert run() == exitcodes.BAD_INPUT
            err = capsys.readouterr().err
            assert f"cannot load kubeconfig {kubeconfig}: while parsing" in err, err
            assert "Traceback" not in err and len(err.splitlines()) == 1, err
    finally:
        root.handlers[:], root.level = handlers, level


def test_devcluster_without_go_says_so_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from fivespot.devcluster.__main__ import main as devcluster_main

    monkeypatch.setenv("FIVESPOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    assert shutil.which("go") is None
    assert devcluster_main(["build", "--debug"]) == exitcodes.BAD_INPUT
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == ("devcluster build: building the control plane needs the Go toolchain "
                       "(`go`) on PATH")
    assert not any("Traceback" in line for line in err)


def test_only_the_process_entry_spares_its_shutdown_the_collector_walks() -> None:
    import gc
    import subprocess
    import sys

    before = gc.get_freeze_count()
    assert main([]) == exitcodes.BAD_INPUT  # an in-process caller (a test) keeps its collector
    assert gc.get_freeze_count() == before
    code = ("import gc, sys; from fivespot.cli.main import main; sys.argv = ['fivespot', 'test', "
            f"{str(EXAMPLE)!r}]; code = main(); print(code, gc.get_freeze_count() > 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.strip().splitlines()[-1] == "0 True", done.stdout + done.stderr


def test_a_check_collects_less_often_and_restores_the_collector_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from fivespot.commandline import collector

    seen = []
    real = collector.fewer_collections

    def watched() -> Any:
        seen.append(gc.get_threshold())
        return real()

    monkeypatch.setattr(collector, "fewer_collections", watched)
    before = gc.get_threshold()
    assert main(["test", str(EXAMPLE)]) == exitcodes.OK
    assert seen == [before] and gc.get_threshold() == before
    with collector.fewer_collections():
        assert gc.get_threshold()[0] == max(before[0], collector.SHORT_RUN_THRESHOLD)
    assert gc.get_threshold() == before


def test_a_long_option_is_not_taken_for_one_it_begins(capsys: pytest.CaptureFixture[str]) -> None:
    from fivespot.cli.main import build_parser

    with pytest.raises(SystemExit) as raised:
        build_parser(["test"]).parse_args(["test", "repo", "--out", "x"])  # --output's prefix
    assert raised.value.code == 2
    assert "unrecognized arguments: --out x" in capsys.readouterr().err


def test_a_mistyped_command_gets_the_nearest_one(capsys: pytest.CaptureFixture[str]) -> None:
    from fivespot.cli.main import build_parser

    with pytest.raises(SystemExit):
        build_parser(["compiel"]).parse_args(["compiel", "repo"])
    assert capsys.readouterr().err.rstrip().endswith("(did you mean 'compile'?)")
