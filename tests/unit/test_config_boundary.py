"""The folder a command is given is a boundary (issue 36, F3): a symlink committed in it that
leads out of it, or into a hidden path in it (`.git/config`), is refused before anything it
points at is read, with a diagnostic naming the link, and nothing of the target reaches stdout
or stderr; `compile`, `test`, `run-example`, `check` (objects and `--policies`), `schedule
preview` and `audit --from` alike. A symlink to a file inside the folder is read once; one to a
folder inside it is not followed (that folder is read where it is). Diagnostics quote at most 80
characters of a value."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fivespot.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent-sandbox" / "config"
TENANT = ROOT / "examples" / "agent-sandbox" / "tenant"
SECRET = "ghs_SENTINEL0123456789abcdefSECRET"
"""What a CI runner's `~/.git-credentials` would hold: it must appear in no output."""


def _refused(link: str, root: Path) -> str:
    return (f"{link}:0:0: refused, not read: a symlink leading out of {root} (or to a hidden file "
            "or folder in it); symlinks in the folder given must point inside it")


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """The bundled example's config folder, with the runner's credentials beside the checkout."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "creds").write_text(f"https://x-access-token:{SECRET}@github.com\n")
    (tmp_path / "outside" / "folder").mkdir()
    (tmp_path / "outside" / "folder" / "x.yaml").write_text(
        f"apiVersion: config.5spot.finos.org/v1alpha1\nkind: {SECRET}\n")
    folder = tmp_path / "checkout" / "config"
    shutil.copytree(EXAMPLE, folder)
    return folder


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("policies") / "out"
    assert main(["compile", str(EXAMPLE), "--out", str(out)]) == 0
    return out


def _config_command(command: str, config: Path) -> list[str]:
    out = ["--out", str(config.parent.parent / "out")] if command != "test" else []
    return [command, str(config), *out]


@pytest.mark.parametrize("command", ["compile", "test", "run-example"])
def test_a_symlink_to_a_file_outside_the_config_folder_is_refused_unread(
        command: str, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (config / "leak.yaml").symlink_to(Path("..", "..", "outside", "creds"))
    assert main(_config_command(command, config)) == 2
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    assert _refused("leak.yaml", config) in err.splitlines()
    assert not (config.parent.parent / "out").exists()


@pytest.mark.parametrize("command", ["compile", "test"])
def test_a_symlink_to_a_folder_outside_the_config_folder_is_refused_unread(
        command: str, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (config / "shared").symlink_to(config.parent.parent / "outside" / "folder",
                                   target_is_directory=True)
    assert main(_config_command(command, config)) == 2
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    assert err.splitlines()[:-1] == [_refused("shared", config)]


def test_a_symlink_into_a_hidden_folder_of_the_config_folder_is_refused_unread(
        config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # actions/checkout keeps the job's token in .git/config, inside the checkout
    (config / ".git").mkdir()
    (config / ".git" / "config").write_text(
        f'[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic {SECRET}\n')
    (config / "git.yaml").symlink_to(Path(".git", "config"))
    assert main(_config_command("compile", config)) == 2
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    assert err.splitlines()[:-1] == [_refused("git.yaml", config)]


def test_symlinks_inside_the_config_folder_work_and_nothing_is_read_twice(
        config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (config / "platform.yaml").rename(config / "platform.txt")
    (config / "platform.yaml").symlink_to("platform.txt")  # read under the link's name
    (config / "tenants-again.yaml").symlink_to("tenants.yaml")  # read anyway: not twice
    (config / "more-fixtures").symlink_to("fixtures", target_is_directory=True)  # not followed
    assert main(["compile", str(config), "--out", str(tmp_path / "linked")]) == 0
    assert main(["compile", str(EXAMPLE), "--out", str(tmp_path / "plain")]) == 0
    assert main(["test", str(config)]) == 0
    capsys.readouterr()
    for path in sorted((tmp_path / "plain").rglob("*")):
        if path.is_file():
            relative = path.relative_to(tmp_path / "plain")
            assert (tmp_path / "linked" / relative).read_bytes() == path.read_bytes(), relative


def test_check_refuses_a_symlink_leaving_an_objects_folder_or_a_policies_folder(
        tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "creds").write_text(f"apiVersion: v1\nkind: Secret\nmetadata: {{name: {SECRET}}}\n")
    objects = tmp_path / "objects"
    shutil.copytree(TENANT, objects)
    (objects / "leak.yaml").symlink_to(tmp_path / "creds")
    assert main(["check", "--policies", str(policies), str(objects)]) == 2
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    assert err.splitlines()[:-1] == [_refused(str(objects / "leak.yaml"), objects)]

    output = tmp_path / "out"
    shutil.copytree(policies, output, symlinks=True)
    (output / "crds" / "leak.yaml").symlink_to(tmp_path / "creds")
    assert main(["check", "--policies", str(output), str(TENANT / "desk.yaml")]) == 2
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    assert err.splitlines()[:-1] == [_refused(str(output / "crds" / "leak.yaml"), output)]


def test_schedule_preview_and_audit_refuse_a_symlink_leaving_a_folder_they_read(
        tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "creds").write_text(f"https://x-access-token:{SECRET}@github.com\n")
    objects = tmp_path / "objects"
    shutil.copytree(TENANT, objects)
    (objects / "leak.yaml").symlink_to(tmp_path / "creds")
    for argv in (["schedule", "preview", str(objects)],
                 ["audit", str(policies), "--from", str(objects)]):
        assert main(argv) == 2, argv
        out, err = capsys.readouterr()
        assert SECRET not in out + err
        assert _refused(str(objects / "leak.yaml"), objects) in err.splitlines(), argv


@pytest.mark.parametrize("field", ["apiVersion", "kind"])
def test_a_diagnostic_quotes_at_most_80_characters_of_a_value(
        field: str, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = "kind: Platform" if field == "apiVersion" else (
        "apiVersion: config.5spot.finos.org/v1alpha1")
    (config / "long.yaml").write_text(f"{field}: {'x' * 70}{SECRET}\n{other}\n")
    assert main(_config_command("compile", config)) == 2
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    line = next(line for line in err.splitlines() if line.startswith("long.yaml:"))
    assert f"'{'x' * 70}ghs_SE..." in line
