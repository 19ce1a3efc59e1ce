"""Every command the tutorial and the how-to guides tell a reader to type runs, and prints what
the page says it prints (tests/integration/docs_commands.py has the rules a page follows).

Each page runs as one reader would run it: in an empty folder, `fivespot` and `kubectl` on PATH,
no KUBECONFIG but the one the page exports, a long-running command in a terminal of its own and
stopped with Ctrl-C at the end. The GitOps part of the tutorial runs with the real engines
(tests/integration/test_docs_gitops.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.docs_commands import DOCS, blocks, pages_with_commands, run_page

pytestmark = pytest.mark.integration

ENGINE_PAGES = {DOCS / "tutorial" / "gitops.md"}
"""Pages whose commands need a GitOps engine: run by test_docs_gitops.py, with the engines."""

PAGES = [page for page in pages_with_commands() if page not in ENGINE_PAGES]


def test_the_tutorial_and_every_how_to_guide_have_commands_to_run() -> None:
    names = {page.relative_to(DOCS).as_posix() for page in pages_with_commands()}
    assert "tutorial/index.md" in names and "tutorial/gitops.md" in names
    assert {p.relative_to(DOCS).as_posix() for p in (DOCS / "how-to").glob("*.md")
            if p.name != "index.md"} <= names


def test_every_skipped_block_says_why() -> None:
    for page in pages_with_commands():
        for block in blocks(page):
            if block.first_line.startswith("# not run"):
                assert block.skipped_because, f"{block.where}: a skipped block needs its reason"


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(DOCS).as_posix() for p in PAGES])
def test_every_command_of_the_page_runs_and_prints_what_the_page_shows(page: Path,
                                                                         tmp_path: Path) -> None:
    run_page(page, tmp_path)
