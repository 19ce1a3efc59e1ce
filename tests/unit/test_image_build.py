"""The image build's inputs agree with each other: the Containerfile, the build script, the lock.

Building and running the image is tested in tests/integration/test_image.py; these checks need no
build, so a drift between the two ways of building the image fails in seconds.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
import zipfile
from collections.abc import Callable
import sys
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.image_scripts import build_script

ROOT = Path(__file__).resolve().parents[2]
build = build_script()


def final_stage() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Containerfile's last stage, continuations joined."""
    text = (ROOT / "Containerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and not line.strip().startswith("#")]
    instructions = [tuple(line.split(None, 1)) for line in lines]
    last_from = max(i for i, (name, _) in enumerate(instructions) if name.upper() == "FROM")
    return [(name.upper(), rest) for name, rest in instructions[last_from:]]


def test_containerfile_final_stage_declares_the_config_the_build_script_writes() -> None:
    stage = dict(final_stage())
    assert stage["FROM"] == "scratch"
    assert stage["USER"] == build.IMAGE_CONFIG.user
    assert tuple(json.loads(stage["ENTRYPOINT"])) == build.IMAGE_CONFIG.entrypoint
    assert stage["WORKDIR"] == build.IMAGE_CONFIG.workingdir
    env = [tuple(item.split("=", 1)) for item in shlex.split(stage["ENV"])]
    assert env == list(build.IMAGE_CONFIG.env)


def test_containerfile_labels_are_the_build_scripts_annotations() -> None:
    labels = dict(item.split("=", 1) for item in shlex.split(dict(final_stage())["LABEL"]))
    written = build.oci_annotations("0.1.0", "abc", 0)
    assert set(labels) == set(written) - {"org.opencontainers.image.created",
                                          "org.opencontainers.image.base.name"}
    for key in ("title", "description", "licenses"):
        key = f"org.opencontainers.image.{key}"
        assert labels[key] == written[key]
    stage_args = dict(rest.split("=", 1) for name, rest in final_stage() if name == "ARG")
    assert stage_args["SOURCE"] == written["org.opencontainers.image.source"]
    assert stage_args["VERSION"] == build.project_version()


def test_containerfile_build_stage_runs_the_same_rootfs_command() -> None:
    text = (ROOT / "Containerfile").read_text()
    assert "image/build.py rootfs /rootfs" in text
    assert "COPY --from=build /rootfs/ /" in text


def test_image_runs_as_the_uid_the_compiled_deployments_set() -> None:
    from fivespot.compiler.emit.workloads import USER_ID

    assert build.USER_ID == USER_ID
    assert build.IMAGE_CONFIG.user == f"{USER_ID}:{USER_ID}"


def _pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as stream:
        return tomllib.load(stream)


@pytest.mark.parametrize(("lock", "requires"), [
    ("REQUIREMENTS", lambda project: project["project"]["dependencies"]),
    ("BUILD_REQUIREMENTS", lambda project: project["build-system"]["requires"]),
], ids=["runtime", "build-backend"])
def test_lock_pins_every_requirement_within_its_pyproject_bounds(
        lock: str, requires: Callable[[dict[str, Any]], list[str]]) -> None:
    path = getattr(build, lock)
    pins = {canonicalize_name(w.name): w.version for w in build.read_pins(path)}
    for text in requires(_pyproject()):
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not pinned in {path.name}"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"{path.name} pins {requirement.name}=={pins[name]}, outside "
            f"pyproject.toml's {requirement.specifier}: run `make image-lock`")


@pytest.mark.parametrize("lock", ["REQUIREMENTS", "BUILD_REQUIREMENTS"])
def test_every_pin_has_exactly_one_sha256(lock: str) -> None:
    path = getattr(build, lock)
    pins = build.read_pins(path)
    assert pins
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            assert len(re.findall(r"--hash=sha256:[0-9a-f]{64}\b", line)) == 1, line


def test_a_pin_without_its_hash_is_refused_naming_the_file_and_line(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text("# pins\n\nflask==3.1.3 --hash=sha256:" + "a" * 64 + "\nsetuptools==84.2.1\n")
    with pytest.raises(build.BuildError, match=r"requirements.txt:4: expected `name==version "
                       r"--hash=sha256:<64 hex digits>`, got 'setuptools==84.2.1'"):
        build.read_pins(lock)


# --- fivespot's own wheel: built by the pinned backend alone --------------------------------------


def _wheel(tmp_path: Path, backend: Path = build.BUILD_REQUIREMENTS) -> tuple[Any, Path]:
    sources, wheels = tmp_path / "src", tmp_path / "wheels"
    sources.mkdir(parents=True)
    build.copy_sources(sources)
    return build.build_wheel(sources, wheels, 1_700_000_000, backend), tmp_path


def test_fivespots_wheel_is_built_by_the_pinned_backend_in_a_venv_of_nothing_else(
        tmp_path: Path) -> None:
    wheel, scratch = _wheel(tmp_path / "one")
    (setuptools,) = build.read_pins(build.BUILD_REQUIREMENTS)
    with zipfile.ZipFile(scratch / "wheels" / wheel.file_name) as archive:
        generator = archive.read("fivespot-0.1.0.dist-info/WHEEL").decode()
    assert f"Generator: setuptools ({setuptools.version})" in generator
    site = scratch / "build-env" / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    installed = sorted(p.name for p in (site / "site-packages").glob("*.dist-info"))
    assert installed == [f"setuptools-{setuptools.version}.dist-info"], "no pip, nothing unpinned"
    again, _ = _wheel(tmp_path / "two")
    assert again == wheel, "the same sources and SOURCE_DATE_EPOCH give the same wheel bytes"


def test_a_build_backend_whose_hash_differs_stops_the_wheel_build(tmp_path: Path) -> None:
    (setuptools,) = build.read_pins(build.BUILD_REQUIREMENTS)
    tampered = tmp_path / "build-requirements.txt"
    tampered.write_text(f"setuptools=={setuptools.version} --hash=sha256:{'0' * 64}\n")
    with pytest.raises(build.BuildError, match="(?i)hash"):
        _wheel(tmp_path / "build", tampered)
    assert not (tmp_path / "build" / "wheels").exists()


# --- the Containerfile's base image and its pip ---------------------------------------------------


def _instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Containerfile").read_text().replace("\\\n", " ")
    return [(name.upper(), rest) for name, _, rest in
            (line.strip().partition(" ") for line in text.splitlines())
            if name and not name.startswith("#")]


def test_every_base_image_of_the_containerfile_is_pinned_by_digest() -> None:
    bases = [rest.split()[0] for name, rest in _instructions() if name == "FROM"]
    assert bases[-1] == "scratch"
    for base in bases[:-1]:
        assert re.fullmatch(r"[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}", base), (
            f"{base}: a tag moves; pin the image by its digest (the tag names it for readers)")


def test_the_containerfile_installs_nothing_from_an_index_without_a_hash() -> None:
    for name, rest in _instructions():
        if name == "RUN" and "pip install" in rest:
            assert "--require-hashes" in rest, rest


@pytest.mark.parametrize(("member", "path"), [
    ("./lib/x86_64-linux-gnu/libc.so.6", "usr/lib/x86_64-linux-gnu/libc.so.6"),
    ("./lib64/ld-linux-x86-64.so.2", "usr/lib64/ld-linux-x86-64.so.2"),
    ("./bin/", "usr/bin"),
    ("./usr/lib/python3.11/json/__init__.py", "usr/lib/python3.11/json/__init__.py"),
    ("./usr/share/doc/libc6/copyright", None),
    ("./usr/share/locale/de/LC_MESSAGES/libc.mo", None),
    ("./usr/lib/python3.11/sqlite3/__init__.py", None),
    ("./usr/lib/python3.11/lib-dynload/_sqlite3.cpython-311-x86_64-linux-gnu.so", None),
    ("./usr/lib/python3.11/ensurepip", None),
    ("./", None),
])
def test_package_members_land_on_merged_usr_paths_or_are_pruned(member: str, path: str | None) -> None:
    assert build.canonical(member) == path


def test_the_package_list_names_packages_one_a_line() -> None:
    names = build.package_names()
    assert len(names) == len(set(names))
    assert {"libc6", "python3.11-minimal", "libpython3.11-stdlib", "libstdc++6"} <= set(names)
    assert not {"dpkg", "apt", "python3-pip", "gcc", "bash", "dash"} & set(names)


def test_the_entrypoint_runs_the_console_script_pyproject_declares() -> None:
    with (ROOT / "pyproject.toml").open("rb") as stream:
        declared = tomllib.load(stream)["project"]["scripts"]["fivespot"]
    assert ":".join(build.console_script()) == declared
