"""Suite-wide wiring: every test is marked `unit`, `integration` or `docs` by the folder it lives in."""

from __future__ import annotations

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
