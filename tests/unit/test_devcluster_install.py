"""`fivespot.devcluster.kubectl.install`: a compiled OUT_DIR applied layer by layer in wave order, the
layers asked to be left out never applied, and OUT_DIR itself never changed by it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fivespot.compiler.emit.base import CRDS, WEBHOOK_CONFIG
from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo
from fivespot.devcluster import kubectl

pytestmark = pytest.mark.unit

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent-sandbox" / "config"


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("skip", [(), (WEBHOOK_CONFIG,)], ids=["everything", "without-webhook"])
def test_install_applies_every_layer_in_wave_order_but_those_left_out_and_leaves_out_dir_as_compiled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, skip: tuple[str, ...]) -> None:
    out = tmp_path / "out"
    write_tree(compile_repo(EXAMPLE).files, out)
    before = _tree(out)
    applied: list[str] = []

    def apply(kubeconfig: Path, path: Path) -> str:
        applied.append(path.name)
        return ""

    def no_cluster(*args: Any, **kwargs: Any) -> str:
        return ""

    monkeypatch.setattr(kubectl, "apply", apply)
    monkeypatch.setattr(kubectl, "wait_established", no_cluster)
    kubectl.install(tmp_path / "kubeconfig", out, skip_layers=skip)
    expected = [layer for layer in kubectl.layers(out) if layer not in skip and (out / layer).is_dir()]
    assert applied == expected and applied[0] == CRDS
    assert (WEBHOOK_CONFIG in applied) == (not skip)
    assert _tree(out) == before
