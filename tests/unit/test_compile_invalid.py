"""Bad config repos fail with exact `FILE:LINE:COL: field: message` errors, exit 2, and leave
OUT_DIR untouched. Each case is a folder `testdata/invalid-*` with its expected stderr.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fivespot.cli import main
from compiler.output import write_tree
from compiler.ownership import MANIFEST

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
