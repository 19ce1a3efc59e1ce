"""Suite-wide wiring: every test is marked `unit`, `integration` or `docs` by the folder it lives in."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

_ROOT = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).relative_to(_ROOT).parts
        if parts[0] == "unit":
            item.add_marker(pytest.mark.unit)
        elif parts[0] == "integration":
            item.add_marker(pytest.mark.integration)
        elif parts[0] == "docs":
            item.add_marker(pytest.mark.docs)
        else:
            raise pytest.UsageError(
                f"{item.nodeid}: tests live under tests/unit, tests/integration or tests/docs")


@pytest.fixture(autouse=True)
def _root_logger_restored() -> Iterator[None]:
    """A test that runs an entry point in-process (`main([...])`) gets the process's logging: the
    root logger's JSON handler on stderr (`fivespot.runtime.logs.configure`). The next test starts with
    the root logger as it was, whatever order the tests run in."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level
