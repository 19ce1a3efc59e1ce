"""Bad config repos fail with exact `FILE:LINE:COL: field: message` errors, exit 2, and leave
OUT_DIR untouched. Each case is a folder `testdata/invalid-*` with its expected stderr.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fivespot.cli.main import main
from fivespot.compiler.output import write_tree
from fivespot.compiler.ownership import MANIFEST

CASES = sorted(p for p in (Path(__file__).parent / "testdata").glob("invalid-*") if p.is_dir())


def test_every_required_kind_of_error_has_a_case() -> None:
    names = {c.name for c in CASES}
    assert {"invalid-unknown-field", "invalid-wrong-type", "invalid-bad-consumer-path",
            "invalid-duplicate-names", "invalid-cel-does-not-compile",
            "invalid-cel-over-budget"} <= names


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_invalid_repo_reports_every_error_with_its_location_and_writes_nothing(
    case: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(case.parent)  # errors about the folder itself name it as it was given
    out = tmp_path / "out"
    write_tree({"previous.yaml": b"kept\n"}, out)  # an earlier output, which compile may replace
    status = main(["compile", case.name, "--out", str(out)])
    captured = capsys.readouterr()
    assert status == 2
    assert captured.err == (case / "expected.txt").read_text()
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "previous.yaml"]
    assert (out / "previous.yaml").read_text() == "kept\n"
    assert "Traceback" not in captured.err


def test_an_empty_document_after_a_trailing_marker_is_skipped_as_kubectl_skips_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(Path(__file__).parent / "testdata" / "valid-no-consumers", repo)
    assert main(["compile", str(repo), "--out", str(tmp_path / "before")]) == 0
    for path in sorted(repo.glob("*.yaml")):
        path.write_text(path.read_text() + "---\n# nothing more\n---\n")
    assert main(["compile", str(repo), "--out", str(tmp_path / "after")]) == 0
    capsys.readouterr()
    before = {p.relative_to(tmp_path / "before"): p.read_bytes()
              for p in (tmp_path / "before").rglob("*") if p.is_file()}
    after = {p.relative_to(tmp_path / "after"): p.read_bytes()
             for p in (tmp_path / "after").rglob("*") if p.is_file()}
    assert after == before


@pytest.mark.parametrize("group,refused", [
    ("admissionregistration.k8s.io", True), ("rbac.authorization.k8s.io", True),
    ("apiextensions.k8s.io", True), ("apiregistration.k8s.io", True),
    ("certificates.k8s.io", True), ("coordination.k8s.io", True), ("k8s.io", True),
    ("gateway.networking.k8s.io", True), ("example.kubernetes.io", True),
    ("5spot.finos.org", True), ("spotschedules.5spot.finos.org", True),
    ("apps", False), ("batch", False), ("autoscaling", False), ("policy", False),
    ("agents.x-k8s.io", False), ("leaderworkerset.x-k8s.io", False), ("notk8s.io", False),
    ("pools.example.com", False), ("my5spot.finos.org", False),
])
def test_a_consumer_group_is_refused_exactly_when_it_is_kubernetes_own_or_fivespots(
        group: str, refused: bool) -> None:
    from fivespot.compiler.spec import refused_consumer_group

    assert (refused_consumer_group(group) is not None) is refused
