"""`fivespot compile --out` writes only what fivespot owns: each refusal exits 2 with a message
that says what is there and what to do, and leaves every byte of it in place."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fivespot.cli.main import main
from fivespot.compiler.output import with_manifest, write_tree
from fivespot.compiler.ownership import MANIFEST, MARKER
from fivespot.compiler.pipeline import compile_repo
from tests.unit.outtree import files_of, folders_of, snapshot

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent-sandbox" / "config"
NO_CONSUMERS = Path(__file__).parent / "testdata" / "valid-no-consumers"


@pytest.fixture()
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch folder holding a copy of the example config as `cfg`, made the current folder,
    with a home folder of its own."""
    shutil.copytree(EXAMPLE, tmp_path / "cfg")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".profile").write_text("export EDITOR=vi\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def compile_into(capsys: pytest.CaptureFixture[str], out: str, config: str = "cfg",
                 *extra: str) -> tuple[int, str]:
    code = main(["compile", config, "--out", out, *extra])
    return code, capsys.readouterr().err


def assert_refused(capsys: pytest.CaptureFixture[str], root: Path, out: str,
                   *phrases: str, config: str = "cfg") -> str:
    """Compile into `out`, expect exit 2 naming `out` and every phrase, and nothing changed
    under `root` (the whole scratch folder, so nothing was written beside `out` either)."""
    before = snapshot(root)
    code, err = compile_into(capsys, out, config)
    assert code == 2, err
    assert err.startswith(f"fivespot compile: --out {out}: "), err
    assert "nothing was written" in err
    for phrase in phrases:
        assert phrase in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert snapshot(root) == before
    return err


def populate(folder: Path) -> Path:
    (folder / "notes").mkdir(parents=True)
    (folder / "notes" / "plan.md").write_text("# the plan\n")
    (folder / "data.bin").write_bytes(bytes(range(256)))
    os.symlink("notes/plan.md", folder / "plan-link")
    (folder / "notes" / "secret").write_text("0600\n")
    (folder / "notes" / "secret").chmod(0o600)
    return folder


# --- refusals -------------------------------------------------------------------------------


def test_a_folder_of_someone_elses_files_is_refused_and_kept(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    populate(work / "mine")
    assert_refused(capsys, work, "mine", "is not fivespot's output",
                   f"no {MANIFEST} manifest", "holds 3 entries: data.bin, notes/, plan-link",
                   "Give --out a new or empty folder")


def test_a_file_is_refused_and_kept(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "precious.txt").write_text("do not rename me\n")
    assert_refused(capsys, work, "precious.txt", "is a file, not a folder")


def test_a_symlink_to_a_file_is_refused_and_both_are_kept(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "target.txt").write_text("data\n")
    os.symlink("target.txt", work / "link")
    assert_refused(capsys, work, "link", "is a file, not a folder")


def test_a_named_pipe_is_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo(work / "pipe")
    assert_refused(capsys, work, "pipe", "is a special file")


def test_a_symlink_to_nothing_is_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.symlink("nowhere", work / "dangling")
    assert_refused(capsys, work, "dangling", "is a symlink to nowhere, which does not exist")


def test_the_config_folder_is_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_refused(capsys, work, "cfg", "is the config folder")


def test_a_folder_containing_the_config_folder_is_refused(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "repo").mkdir()
    shutil.move(work / "cfg", work / "repo" / "cfg")
    assert_refused(capsys, work, "repo", "contains the config folder repo/cfg", config="repo/cfg")


def test_a_fivespot_output_that_holds_the_config_folder_is_refused(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree({"README.md": b"old\n"}, work / "out")
    shutil.move(work / "cfg", work / "out" / "cfg")
    assert_refused(capsys, work, "out", "contains the config folder out/cfg", config="out/cfg")


def test_a_folder_inside_the_config_folder_is_refused(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_refused(capsys, work, "cfg/out", "is inside the config folder cfg")


def test_a_git_checkout_is_refused_and_its_git_folder_kept(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkout = work / "checkout"
    checkout.mkdir()
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    (checkout / "main.go").write_text("package main\n")
    assert_refused(capsys, work, "checkout", "holds .git: it is a git checkout",
                   "checkout/deploy")


def test_a_git_worktree_whose_git_is_a_file_is_refused(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "worktree").mkdir()
    (work / "worktree" / ".git").write_text("gitdir: /elsewhere/.git/worktrees/x\n")
    assert_refused(capsys, work, "worktree", "holds .git")


def test_an_empty_folder_holding_only_git_is_refused(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "fresh" / ".git").mkdir(parents=True)
    assert_refused(capsys, work, "fresh", "holds .git")


def test_the_root_folder_is_refused_and_nothing_is_created_in_it(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = sorted(os.listdir("/"))
    assert_refused(capsys, work, "/", "is the root folder")
    assert sorted(os.listdir("/")) == before


def test_the_home_folder_is_refused_and_kept(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_refused(capsys, work, str(work / "home"), "is your home folder")


def test_an_empty_home_folder_is_refused_too(
        work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (work / "empty-home").mkdir()
    monkeypatch.setenv("HOME", str(work / "empty-home"))
    assert_refused(capsys, work, "empty-home", "is your home folder")


def test_the_current_folder_is_refused(work: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (work / "empty").mkdir()
    monkeypatch.chdir(work / "empty")
    assert_refused(capsys, work, ".", "is the current folder", "cd to its parent",
                   config=str(work / "cfg"))


def test_a_folder_containing_the_current_folder_is_refused(
        work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    write_tree({"a/README.md": b"old\n"}, work / "out")
    monkeypatch.chdir(work / "out" / "a")
    assert_refused(capsys, work, "..", "contains the current folder", config=str(work / "cfg"))


def test_a_mount_point_is_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert os.path.ismount("/proc")
    assert_refused(capsys, work, "/proc", "is a mount point")


def test_a_file_added_to_a_previous_output_is_refused_by_name(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert compile_into(capsys, "out")[0] == 0
    (work / "out" / "crds" / "my-extra-crd.yaml").write_text("kind: Mine\n")
    (work / "out" / "local").mkdir()
    (work / "out" / "local" / "values.yaml").write_text("a: 1\n")
    os.symlink("/etc/hostname", work / "out" / "hostname")
    assert_refused(capsys, work, "out", "is fivespot's earlier output",
                   "holds 3 entries: crds/my-extra-crd.yaml, hostname, local/",
                   "fivespot did not write", "Move them out of the folder")


def test_a_listed_file_replaced_by_a_folder_is_refused(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert compile_into(capsys, "out")[0] == 0
    (work / "out" / "bundle.json").unlink()
    (work / "out" / "bundle.json").mkdir()
    (work / "out" / "bundle.json" / "mine").write_text("x\n")
    assert_refused(capsys, work, "out", "bundle.json/")


def test_an_output_from_before_the_manifest_is_refused_with_the_way_out(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert compile_into(capsys, "out")[0] == 0
    (work / "out" / MANIFEST).unlink()
    assert_refused(capsys, work, "out", "is not fivespot's output",
                   "delete the folder yourself and compile again")


def test_a_manifest_that_is_not_fivespots_is_not_trusted(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "out").mkdir()
    (work / "out" / MANIFEST).write_text("README.md\n")
    (work / "out" / "README.md").write_text("mine\n")
    assert_refused(capsys, work, "out", "is not fivespot's output")


def test_a_path_under_a_file_is_refused_before_compiling(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "plain.txt").write_text("not a folder\n")
    assert_refused(capsys, work, "plain.txt/sub/out", "cannot be created",
                   f"{work / 'plain.txt'} is a file, not a folder")


@pytest.mark.parametrize(("out", "phrase"), [
    ("mine", "is not fivespot's output"),
    ("plain.txt", "is a file, not a folder"),
    ("plain.txt/sub", "cannot be created"),
    ("cfg", "is the config folder"),
    ("/", "is the root folder"),
    ("home", "is your home folder"),
])
def test_check_refuses_what_compile_refuses_instead_of_calling_it_stale(
        work: Path, capsys: pytest.CaptureFixture[str], out: str, phrase: str) -> None:
    # `--check` suggests `compile --out OUT`, so it takes the same decision, before reading any
    # of OUT (`--out /` once read every file under /, /proc included)
    populate(work / "mine")
    (work / "plain.txt").write_text("not a folder\n")
    target = str(work / "home") if out == "home" else out
    before = snapshot(work)
    code, err = compile_into(capsys, target, "cfg", "--check")
    assert code == 2, err
    assert err.startswith(f"fivespot compile: --out {target}: ") and phrase in err, err
    assert snapshot(work) == before


def test_run_example_refuses_like_compile(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    populate(work / "mine")
    before = snapshot(work)
    assert main(["run-example", "cfg", "--out", "mine"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fivespot run-example: --out mine: is not fivespot's output"), err
    assert snapshot(work) == before


def test_a_refusal_comes_before_compiling(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "cfg" / "platform.yaml").write_text("kind: [broken\n")
    (work / "precious.txt").write_text("x\n")
    assert_refused(capsys, work, "precious.txt", "is a file, not a folder")


# --- what is accepted -------------------------------------------------------------------------


@pytest.fixture()
def umask() -> Iterator[None]:
    previous = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(previous)


def test_an_absent_folder_is_created_with_its_parents_and_the_umasks_modes(
        work: Path, capsys: pytest.CaptureFixture[str], umask: None) -> None:
    assert compile_into(capsys, "deploy/clusters/prod")[0] == 0
    out = work / "deploy" / "clusters" / "prod"
    assert files_of(out) == with_manifest(compile_repo(EXAMPLE).files)
    for relative, (kind, mode, _) in snapshot(work / "deploy").items():
        assert mode == (0o750 if kind == "dir" else 0o640), relative


def test_the_default_umask_gives_the_modes_of_any_other_tool(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    previous = os.umask(0o022)
    try:
        assert compile_into(capsys, "out")[0] == 0
    finally:
        os.umask(previous)
    modes = {kind: {mode for k, mode, _ in snapshot(work / "out").values() if k == kind}
             for kind in ("dir", "file")}
    assert modes == {"dir": {0o755}, "file": {0o644}}


def test_an_empty_folder_is_filled(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "out").mkdir()
    assert compile_into(capsys, "out")[0] == 0
    assert files_of(work / "out") == with_manifest(compile_repo(EXAMPLE).files)


def test_its_own_output_is_replaced_by_exactly_the_new_files(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert compile_into(capsys, "out", str(EXAMPLE))[0] == 0
    (work / "out" / "README.md").write_text("edited by hand\n")
    (work / "out" / "crds" / "kustomization.yaml").unlink()
    assert compile_into(capsys, "out", str(NO_CONSUMERS))[0] == 0
    assert files_of(work / "out") == with_manifest(compile_repo(NO_CONSUMERS).files)
    assert "schedules" not in folders_of(work / "out")
    assert sorted(p.name for p in work.iterdir()) == ["cfg", "home", "out"]


def test_the_manifest_lists_every_file_after_its_marker(work: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert compile_into(capsys, "out")[0] == 0
    lines = (work / "out" / MANIFEST).read_text().splitlines()
    assert lines[0] == MARKER
    listed = [line for line in lines if not line.startswith("#")]
    assert listed == sorted(compile_repo(EXAMPLE).files)


def test_check_compares_the_manifest_too(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert compile_into(capsys, "out")[0] == 0
    assert main(["compile", "cfg", "--out", "out", "--check"]) == 0
    with (work / "out" / MANIFEST).open("a") as manifest:  # lists a file no longer there
        manifest.write("crds/gone.yaml\n")
    assert main(["compile", "cfg", "--out", "out", "--check"]) == 1
    assert f"+++ b/{MANIFEST}" in capsys.readouterr().out
    (work / "out" / MANIFEST).unlink()  # no longer fivespot's: refused, as compile refuses it
    assert main(["compile", "cfg", "--out", "out", "--check"]) == 2
    assert "is not fivespot's output" in capsys.readouterr().err


def test_what_a_killed_compile_left_beside_the_output_is_removed_by_the_next(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert compile_into(capsys, "out")[0] == 0
    staging = work / ".out.fivespot-0badcafe"
    shutil.copytree(work / "out", staging)
    (staging / "crds" / "kustomization.yaml").unlink()  # killed while deleting
    (work / ".out.fivespot-00000000").mkdir()           # killed right after creating it
    foreign = work / ".out.fivespot-mine"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("not fivespot's\n")
    assert compile_into(capsys, "out")[0] == 0
    assert sorted(p.name for p in work.iterdir()) == [".out.fivespot-mine", "cfg", "home", "out"]
    assert (foreign / "keep.txt").read_text() == "not fivespot's\n"
