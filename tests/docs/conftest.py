"""The docs site, built once per run from docs/ exactly as `make docs` builds it (every warning an
error), and Debian's headless Chromium, for every test that looks at the site or a picture."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [str(Path(sys.executable).parent / "sphinx-build"), "-E", "-W", "--keep-going", "-n", "-q",
         "-b", "html", str(ROOT / "docs"), str(out)],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"the docs site does not build strictly:\n{result.stderr}"
    return out


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Debian's chromium is needed (apt-get install chromium; .ci/run installs it)"
    return found
