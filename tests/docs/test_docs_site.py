"""The docs site builds strictly, every address fivespot names is in it, and it renders.

The site is built once per run from docs/ exactly as `make docs` builds it, with every warning an
error (a broken link or anchor, a page in no table of contents, a generated table that fails).
The alerts' runbook URLs and the addresses in messages are then looked up in the built files, page
and anchor. Headless Chromium (Debian's) takes a screenshot of the home page and of a generated
reference page, which must show the page, not a blank or an error.
"""

from __future__ import annotations

import html
import re
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from fivespot.commandline.docs import DOCS_URL
from fivespot.compiler.emit.monitoring import EVERY_ALERT
from tests.docs.conftest import chromium
from tests.repo_text import docs_addresses


def _built(site: Path, address: str) -> tuple[Path, str]:
    relative, _, anchor = address.removeprefix(DOCS_URL).partition("#")
    return site / (relative or "index.html"), anchor


def _text(page: Path) -> str:
    """What a reader sees of a page: its HTML without tags (highlighting splits code in spans)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def test_the_site_builds_with_every_warning_an_error(site: Path) -> None:
    assert (site / "index.html").exists() and (site / "reference" / "cli.html").exists()


def test_every_alerts_runbook_url_is_a_page_of_the_built_site(site: Path) -> None:
    for alert in EVERY_ALERT:
        page, _ = _built(site, alert.runbook_url)
        assert page.is_file(), f"{alert.name}: {alert.runbook_url} is not in the built site"
        shown = _text(page)
        assert alert.name in shown and alert.expr in shown, f"{page}: not the alert's definition"


def test_every_docs_address_in_a_message_is_a_page_and_anchor_of_the_built_site(site: Path) -> None:
    addresses = docs_addresses()
    assert addresses, "no message names a docs address"
    for address in addresses:
        page, anchor = _built(site, address)
        assert page.is_file(), f"{address}: no page {page.relative_to(site)}"
        if anchor:
            assert f'id="{anchor}"' in page.read_text(), f"{address}: no anchor #{anchor}"


def test_the_generated_reference_pages_list_every_command_metric_and_exit_code(site: Path) -> None:
    from fivespot.commandline import exitcodes
    from fivespot.cli.main import RUNTIME_COMMANDS

    cli = (site / "reference" / "cli.html").read_text()
    for command in ["compile", "check", "test", "init", *RUNTIME_COMMANDS]:
        assert f'<section id="fivespot-{command}"' in cli, f"fivespot {command} is not in the CLI reference"
    metrics = _text(site / "reference" / "metrics.html")
    for name in ("fivespot_reconcile_errors_total", "fivespot_objects_out_of_policy",
                 "fivespot_webhook_admission_duration_seconds"):
        assert name in metrics
    codes = (site / "reference" / "exit-codes.html").read_text()
    assert all(f"<td><p>{code}</p></td>" in codes for code in exitcodes.ALL)


@pytest.mark.parametrize("page", ["index.html", "reference/kinds.html"])
def test_a_real_browser_renders_the_page(site: Path, page: str, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--hide-scrollbars", "--window-size=1280,900", f"--screenshot={shot}",
         (site / page).as_uri()],
        capture_output=True, timeout=120, check=True)
    image = Image.open(shot).convert("L")
    assert image.size == (1280, 900)
    histogram = image.histogram()
    dark = sum(histogram[:100]) / (1280 * 900)
    white = histogram[255] / (1280 * 900)
    # A rendered page: mostly white paper, and text (dark pixels) on it; a blank or an error page
    # has none, a page without its stylesheet has no sidebar (light grey) either.
    assert 0.005 < dark < 0.25, f"{page}: {dark:.1%} dark pixels, not a page of text"
    assert 0.4 < white < 0.98, f"{page}: {white:.1%} white pixels"
    sidebar = image.crop((0, 300, 300, 900)).histogram()
    assert sum(sidebar[230:255]) > 0.5 * 300 * 600, f"{page}: no theme sidebar (stylesheet not loaded?)"
