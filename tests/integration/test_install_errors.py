"""`fivespot install` stops at the first object the API server refuses and names it; bad input
(not compiled output, no such kubeconfig context) is exit 2 before anything is sent.

On a control plane of this module's own: installing and deleting fivespot's CRDs must not touch
the ones other modules installed on the shared one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from collections.abc import Iterator

import pytest
import yaml

from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo
from fivespot.compiler.scaffold import init
from tests.integration.conftest import own_control_plane


@pytest.fixture(scope="module")
def kubeconfig() -> Iterator[Path]:
    with own_control_plane() as own:
        yield own.kubeconfig


def fivespot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fivespot", *args], capture_output=True,
                          text=True, timeout=300)


@pytest.fixture
def out(tmp_path: Path) -> Path:
    init(tmp_path / "config")
    platform = tmp_path / "config" / "platform.yaml"
    platform.write_text(platform.read_text().replace("namespace: 5spot-system", "namespace: fivespot-refused"))
    write_tree(compile_repo(tmp_path / "config").files, tmp_path / "out")
    return tmp_path / "out"


def test_a_refused_object_stops_the_install_and_is_named_with_its_file(out: Path, kubeconfig: Path) -> None:
    role = next((out / "rbac").glob("*leases.role.yaml"))
    obj = yaml.safe_load(role.read_text())
    obj["rules"][0]["verbs"] = []  # the API server requires at least one verb
    role.write_text(yaml.safe_dump(obj))
    done = fivespot("install", str(out), "--kubeconfig", str(kubeconfig), "--timeout", "60")
    assert done.returncode == 1, done.stdout + done.stderr
    name = obj["metadata"]["name"]
    assert f"rbac/{role.name}: role fivespot-refused/{name}: the API server refused it:" in done.stderr
    assert "verbs" in done.stderr
    assert "wave 3" not in done.stdout, "nothing after the refused object's wave may be applied"


def test_a_folder_that_is_not_compiled_output_is_exit_2(tmp_path: Path, kubeconfig: Path) -> None:
    (tmp_path / "notes").mkdir()
    done = fivespot("install", str(tmp_path / "notes"), "--kubeconfig", str(kubeconfig))
    assert done.returncode == 2
    assert "no kustomization.yaml; is this the output of `fivespot compile`?" in done.stderr


def test_an_unknown_context_is_exit_2_naming_it(out: Path, kubeconfig: Path) -> None:
    done = fivespot("install", str(out), "--kubeconfig", str(kubeconfig), "--context", "nope")
    assert done.returncode == 2
    assert "context nope" in done.stderr and str(kubeconfig) in done.stderr


def test_uninstall_with_delete_crds_removes_them(out: Path, kubeconfig: Path, tmp_path: Path) -> None:
    crds_only = tmp_path / "crds-only"
    shutil.copytree(out, crds_only)
    (crds_only / "kustomization.yaml").write_text("resources: [crds]\n")
    shutil.rmtree(crds_only / "waves", ignore_errors=True)  # install follows waves/ when present
    assert fivespot("install", str(crds_only), "--kubeconfig", str(kubeconfig)).returncode == 0
    kept = fivespot("uninstall", str(crds_only), "--kubeconfig", str(kubeconfig))
    assert kept.returncode == 0 and "kept 5 CRDs" in kept.stdout
    gone = fivespot("uninstall", str(crds_only), "--kubeconfig", str(kubeconfig), "--delete-crds")
    assert gone.returncode == 0, gone.stderr
    assert gone.stdout.count("customresourcedefinition") == 5 and " deleted" in gone.stdout
