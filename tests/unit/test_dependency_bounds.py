"""Every runtime dependency is bounded on both sides in pyproject.toml, and the suite runs where
it claims to: within the bounds in .venv/, at exactly the lower bounds in .venv-lowest/."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def _lower_bounds() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lower_bounds", ROOT / "tools" / "lower_bounds.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_runtime_dependency_has_a_lower_and_an_upper_bound() -> None:
    tool = _lower_bounds()
    requirements = tool.runtime_requirements()
    assert {r.name for r in requirements} >= {"pydantic", "kubernetes", "exchange-calendars", "pandas"}
    assert list(tool.problems(requirements)) == []


def test_a_dependency_without_an_upper_bound_is_named() -> None:
    tool = _lower_bounds()
    assert list(tool.problems([Requirement("flask>=3.0")])) == ["flask>=3.0: no upper bound"]
    assert list(tool.problems([Requirement("flask")])) == [
        "flask: no lower and no upper bound"]
    assert tool.constraints([Requirement("flask>=3.0,<4"), Requirement("x==1.2")]) == (
        "flask==3.0\nx==1.2\n")


def test_the_installed_versions_are_the_ones_the_bounds_allow() -> None:
    tool = _lower_bounds()
    lowest = Path(sys.prefix).name == ".venv-lowest"
    for requirement in tool.runtime_requirements():
        installed = importlib.metadata.version(requirement.name)
        assert requirement.specifier.contains(installed, prereleases=True), (requirement, installed)
        if lowest:  # 3.0 == 3.0.0
            assert Version(installed) == Version(tool.lower_bound(requirement)), (
                requirement, installed)
