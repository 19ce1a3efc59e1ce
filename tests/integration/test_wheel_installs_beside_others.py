"""The built wheel installs beside distributions that own the generic top-level names fivespot's
packages once had (`api`, `runtime`): both keep working, and so does `fivespot` (decision 0037).

Everything happens in a fresh venv outside the checkout, run from a folder that is not the
checkout, so nothing of the repository is on `sys.path`: what imports is what was installed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OTHERS = ("api", "runtime")

pytestmark = pytest.mark.integration


def run(*argv: str | Path, cwd: Path) -> str:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def fivespot_wheel(work: Path) -> Path:
    """fivespot's wheel, built from a copy of what the wheel is built from (the checkout gets no
    build/ or egg-info)."""
    source = work / "fivespot-src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "fivespot", source / "fivespot",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
        "--wheel-dir", work / "wheels", source, cwd=work)
    (wheel,) = (work / "wheels").glob("fivespot-*.whl")
    return wheel


def other_distribution(work: Path, package: str) -> Path:
    """A distribution named `other-PACKAGE` whose one top-level package is PACKAGE."""
    folder = work / f"other-{package}"
    (folder / package).mkdir(parents=True)
    (folder / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "other-{package}"
        version = "1.0"

        [tool.setuptools]
        packages = ["{package}"]
        """))
    (folder / package / "__init__.py").write_text(f'OWNER = "other-{package}"\n')
    return folder


def test_the_wheel_installs_beside_packages_named_api_and_runtime(tmp_path: Path) -> None:
    wheel = fivespot_wheel(tmp_path)
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    others = [other_distribution(tmp_path, package) for package in OTHERS]
    run(python, "-m", "pip", "install", "--quiet", *others, cwd=tmp_path)
    run(python, "-m", "pip", "install", "--quiet", wheel, cwd=tmp_path)

    installed = run(python, "-c", "import api, runtime; print(api.OWNER, runtime.OWNER)",
                    cwd=tmp_path)
    assert installed.split() == ["other-api", "other-runtime"]
    top_level = (next((venv / "lib").glob("python3.*/site-packages/fivespot-*.dist-info"))
                 / "top_level.txt")
    if top_level.exists():
        assert top_level.read_text().split() == ["fivespot"]
    run(python, "-c", "import fivespot.api.kinds, fivespot.runtime.manager, fivespot.cli.main",
        cwd=tmp_path)
    assert "fivespot compiles a config repo" in run(venv / "bin" / "fivespot", "--help",
                                                    cwd=tmp_path)
