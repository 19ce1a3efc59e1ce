"""The repository's own text files, read once per test process, for the tests that scan them
(nothing cites outside the repo, every Markdown link resolves, every docs address the code names
is a page of the site)."""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

from fivespot.commandline.docs import DOCS_URL

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def tracked_text_files() -> tuple[tuple[Path, str], ...]:
    """(path, text) of every tracked or untracked-but-not-ignored text file, skipping images,
    archives, the golden output and generated test data."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    found = []
    for name in listed:
        path = ROOT / name
        if not path.is_file() or path.suffix in (".png", ".tar", ".gz", ".whl") \
                or "/golden/" in name or name.startswith("tests/unit/testdata/generated"):
            continue
        try:
            found.append((path, path.read_text()))
        except UnicodeDecodeError:
            continue
    return tuple(found)


def docs_addresses() -> set[str]:
    """Every address of the docs site the code names: literal, or through `docs.page(...)`."""
    found: set[str] = set()
    for path, text in tracked_text_files():
        if path.suffix not in (".py", ".yaml", ".j2") or "tests" in path.relative_to(ROOT).parts:
            continue
        found |= set(re.findall(re.escape(DOCS_URL) + r"[\w./#-]*", text))
        found |= {DOCS_URL + p for p in re.findall(r"docs\.page\([\"']([^\"']*)[\"']\)", text)}
    found.discard(DOCS_URL + "operations/alerts/")
    return found
