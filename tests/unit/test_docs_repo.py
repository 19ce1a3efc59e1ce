"""The repository is whole on its own, and its docs keep what the README used to hold.

A clone has no `../shared/` design or seed documents: nothing may point there, or anywhere else
outside the repository. The README stays a page or two; every section that left it is a heading
of a page of the docs site (the checklist below). Every alert's runbook and every docs address a
message names is a page of the site's sources (the built site is checked in tests/docs/).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fivespot.commandline.docs import DOCS_URL
from fivespot.compiler.emit.monitoring import EVERY_ALERT
from tests.repo_text import ROOT, docs_addresses, tracked_text_files

DOCS = ROOT / "docs"

OUTSIDE = re.compile(
    r"\.\./shared|/work/(?:shared|main|\.library|\.mirror)|\bseeds?/|\bseed 00\d|DESIGN\.md|DESIGN §"
    r"|DESIGN section", re.IGNORECASE)
"""How the repository used to cite what lived beside it: the first design, the seed documents."""

MOVED = {
    "The two commands": ("contributing/development.md", "The two commands"),
    "Compiling a config repo": ("reference/compile.md", "Compiling a config repo"),
    "Who may do what: the identities": ("reference/identities.md", "Who may do what: the identities"),
    "What `--out` accepts and refuses": ("reference/compile.md", "What `--out` accepts and refuses"),
    "GitOps: waves, health, deletion safety, CI": (
        "operations/gitops.md", "GitOps: waves, health, deletion safety, CI"),
    "Waves": ("operations/gitops.md", "Waves"),
    "Argo CD": ("operations/gitops.md", "Argo CD"),
    "Health in Argo CD and Flux": ("operations/health.md", "Health in Argo CD and Flux"),
    "Flux": ("operations/gitops.md", "Flux"),
    "Deletion safety": ("operations/gitops.md", "Deletion safety"),
    "Compile warnings": ("operations/gitops.md", "Compile warnings"),
    "CI for the config repo": ("how-to/ci.md", "Run fivespot in CI"),
    "Real Argo CD and Flux in the tests": (
        "contributing/gitops-engines.md", "Real Argo CD and Flux in the tests"),
    "Exit codes and errors": ("reference/exit-codes.md", "Exit codes and errors"),
    "Checking objects offline: `fivespot check` and `fivespot test`": (
        "reference/check.md", "Checking objects offline: `fivespot check` and `fivespot test`"),
    "The admission webhook (`fivespot/webhook/`)": ("explanation/webhook.md", "The admission webhook (`fivespot/webhook/`)"),
    "The capacity controller": ("explanation/capacity-controller.md", "The capacity controller"),
    "The machine controller (ScheduledMachine)": (
        "explanation/machine-controller.md", "The machine controller (ScheduledMachine)"),
    "One governor per field and per host": (
        "explanation/one-governor.md", "One governor per field and per host"),
    "When a policy changes: the objects already stored": (
        "operations/policy-changes.md", "When a policy changes: the objects already stored"),
    "Schedule providers and exchange calendars": (
        "explanation/providers.md", "Schedule providers and exchange calendars"),
    "The provider contract, and your own provider kinds": (
        "explanation/provider-contract.md", "The provider contract, and your own provider kinds"),
    "CompositeSchedule: anyOf, allOf, not": ("explanation/providers.md", "CompositeSchedule: anyOf, allOf, not"),
    "When will capacity be on? `fivespot schedule preview`": (
        "explanation/providers.md", "When will capacity be on? `fivespot schedule preview`"),
    "Exchange calendars, compiled and reviewed": (
        "reference/calendars.md", "Exchange calendars, compiled and reviewed"),
    "The controller runtime (`fivespot/runtime/`)": ("explanation/runtime.md", "The controller runtime (`fivespot/runtime/`)"),
    "Faults: what users see when the API server or the webhook fails": (
        "operations/faults.md", "Faults: what users see when the API server or the webhook fails"),
    "Installing on a cluster: `fivespot install` / `fivespot uninstall`": (
        "operations/install.md", "Installing on a cluster: `fivespot install` / `fivespot uninstall`"),
    "Trying a config repo locally: `fivespot dev`": (
        "how-to/try-locally.md", "Trying a config repo locally: `fivespot dev`"),
    "Monitoring and alerts": ("operations/monitoring.md", "Monitoring and alerts"),
    **{f"Alert: {alert.name}": (f"operations/alerts/{alert.name.lower()}.md", alert.name)
       for alert in EVERY_ALERT},
    "The container image": ("operations/image.md", "The container image"),
    "Kubernetes versions": ("reference/kubernetes-versions.md", "Kubernetes versions"),
    "The local control plane (real kube-apiserver + etcd, no Docker)": (
        "contributing/control-plane.md", "The local control plane (real kube-apiserver + etcd, no Docker)"),
    "Layout": ("explanation/architecture.md", "Layout"),
}
"""Every section of the README before the docs site (commit dfa355f): the page it is now, and
its heading there. The README kept its title, the two commands (in short) and the quick start."""


def _headings(page: Path) -> list[str]:
    found, fence = [], False
    for line in page.read_text().split("\n"):
        if line.startswith("```"):
            fence = not fence
        elif not fence and (match := re.match(r"^#{1,6} (.*)$", line)):
            found.append(match.group(1).strip())
    return found


def test_no_file_of_the_repository_refers_to_a_path_outside_it() -> None:
    this = Path(__file__).resolve()
    offending = []
    for path, text in tracked_text_files():
        if path == this:
            continue
        for number, line in enumerate(text.split("\n"), 1):
            if OUTSIDE.search(line):
                offending.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert not offending, "\n".join(offending)


def test_every_relative_link_of_every_markdown_file_stays_in_the_repository_and_exists() -> None:
    broken = []
    for path, text in tracked_text_files():
        if path.suffix != ".md":
            continue
        text = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:|^#", target):
                continue
            resolved = (path.parent / target.split("#", 1)[0]).resolve()
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target}")
    assert not broken, "\n".join(broken)


def test_every_repository_path_the_design_names_exists() -> None:
    missing = []
    for page in (DOCS / "design").rglob("*.md"):
        for name in re.findall(r"`([a-z_][\w./-]*/[\w.-]+)`", page.read_text()):
            if "<" in name or name.startswith(("~", "spec.", "status.", "metadata.")) \
                    or re.match(r"^[\w.-]+\.[a-z]+/v\d", name) or "." not in name and "/" not in name:
                continue
            candidate = ROOT / name.split("::", 1)[0]
            if re.match(r"^(api|runtime|controllers|compiler|policies|webhook|deploy|devcluster|"
                        r"commandline|fivespot|tests|bench|tools|examples|docs|image)/", name) \
                    and not candidate.exists():
                missing.append(f"{page.relative_to(ROOT)}: {name}")
    assert not missing, "\n".join(missing)


def test_the_readme_is_a_page_or_two() -> None:
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= 200, f"README.md has {lines} lines; move what it grew into a page of docs/"


@pytest.mark.parametrize("section", sorted(MOVED))
def test_every_section_that_left_the_readme_is_a_heading_of_a_docs_page(section: str) -> None:
    page, heading = MOVED[section]
    assert heading in _headings(DOCS / page), f"{section!r}: no heading {heading!r} in docs/{page}"


def test_every_alert_has_its_runbook_page_at_the_address_it_names() -> None:
    for alert in EVERY_ALERT:
        page = DOCS / "operations" / "alerts" / f"{alert.name.lower()}.md"
        assert page.exists(), f"{alert.name}: no runbook page {page.relative_to(ROOT)}"
        assert alert.runbook_url == f"{DOCS_URL}operations/alerts/{alert.name.lower()}.html"
        assert f"```{{fivespot-alert}} {alert.name}" in page.read_text(), \
            f"{page.relative_to(ROOT)} does not show the alert's definition"


def test_every_docs_address_in_the_code_is_a_page_of_the_site() -> None:
    for address in docs_addresses():
        path = address.removeprefix(DOCS_URL).split("#", 1)[0].removesuffix(".html")
        candidates = [DOCS / f"{path}.md", DOCS / path / "index.md"] if path else [DOCS / "index.md"]
        assert any(c.exists() for c in candidates), f"{address}: no page docs/{path}.md"
