"""The image build's inputs agree with each other: the Containerfile, the build script, the lock.

Building and running the image is tested in tests/integration/test_image.py; these checks need no
build, so a drift between the two ways of building the image fails in seconds.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def _load_build() -> ModuleType:
    spec = importlib.util.spec_from_file_location("image_build", ROOT / "image" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["image_build"] = module
    spec.loader.exec_module(module)
    return module


build = _load_build()


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
    from compiler.emit.workloads import USER_ID

    assert build.USER_ID == USER_ID
    assert build.IMAGE_CONFIG.user == f"{USER_ID}:{USER_ID}"


def _pins() -> dict[str, tuple[str, list[str]]]:
    pins: dict[str, tuple[str, list[str]]] = {}
    for line in build.REQUIREMENTS.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        requirement, *hashes = line.split(" --hash=")
        name, version = requirement.split("==")
        pins[canonicalize_name(name)] = (version, hashes)
    return pins


def test_lock_pins_every_runtime_dependency_within_its_pyproject_bounds() -> None:
    with (ROOT / "pyproject.toml").open("rb") as stream:
        dependencies = tomllib.load(stream)["project"]["dependencies"]
    pins = _pins()
    for text in dependencies:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not pinned in image/requirements.txt"
        assert requirement.specifier.contains(pins[name][0], prereleases=True), (
            f"image/requirements.txt pins {requirement.name}=={pins[name][0]}, outside "
            f"pyproject.toml's {requirement.specifier}: run `make image-lock`")


def test_every_pin_has_exactly_one_sha256() -> None:
    for name, (_, hashes) in _pins().items():
        assert len(hashes) == 1 and hashes[0].startswith("sha256:"), name


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
