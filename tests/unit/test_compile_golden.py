"""The compiler's output is pinned byte for byte, and independent of how the input is laid out."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml

from fivespot.compiler.output import diff_tree
from fivespot.compiler.pipeline import compile_repo

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent-sandbox" / "config"
GOLDEN = Path(__file__).parent / "golden" / "agent-sandbox"
NO_CONSUMERS = Path(__file__).parent / "testdata" / "valid-no-consumers"


def test_example_compiles_to_the_golden_output() -> None:
    diff = diff_tree(compile_repo(EXAMPLE).files, GOLDEN)
    assert diff == "", f"compiled output differs from golden (see tests/unit/golden/README.md):\n{diff}"


def _documents(config: Path) -> list[str]:
    texts: list[str] = []
    for path in sorted(config.rglob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document is not None:
                texts.append(yaml.safe_dump(document, sort_keys=bool(len(texts) % 2)))
    return texts


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_shuffled_and_renamed_input_files_give_identical_bytes(seed: int, tmp_path: Path) -> None:
    shuffler = random.Random(seed)
    documents = _documents(EXAMPLE)
    shuffler.shuffle(documents)
    while documents:
        take = shuffler.randint(1, 3)
        chunk, documents = documents[:take], documents[take:]
        folder = tmp_path / shuffler.choice(["", "a", "b/c", "zz"])
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{shuffler.getrandbits(32):08x}.{shuffler.choice(['yaml', 'yml'])}"
        (folder / name).write_text("---\n".join(chunk))
    assert compile_repo(tmp_path).files == compile_repo(EXAMPLE).files


def test_compiling_twice_gives_identical_bytes() -> None:
    assert compile_repo(EXAMPLE).files == compile_repo(EXAMPLE).files


def test_a_repo_without_consumers_has_no_capacity_component() -> None:
    compiled = compile_repo(NO_CONSUMERS)
    kinds_and_names = {(a.kind, a.name) for a in compiled.artifacts}
    text = "\n".join(f"{k}/{n}" for k, n in sorted(kinds_and_names))
    assert "capacity" not in text
    assert not any(k in ("ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy")
                   for k, _ in kinds_and_names)
    crds = {n for k, n in kinds_and_names if k == "CustomResourceDefinition"}
    assert crds == {"manualschedules.spotschedules.5spot.finos.org",
                    "timebasedspotschedules.spotschedules.5spot.finos.org"}
    assert '"consumers": []' in compiled.files["bundle.json"].decode()


def test_check_mode_passes_when_output_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    from fivespot.cli.main import main

    assert main(["compile", str(EXAMPLE), "--out", str(GOLDEN), "--check"]) == 0
    assert "up to date" in capsys.readouterr().out


def test_check_mode_fails_with_a_unified_diff_when_output_is_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    from fivespot.cli.main import main

    stale = tmp_path / "out"
    shutil.copytree(GOLDEN, stale)
    policy = stale / "admission" / "params" / "agents.yaml"
    policy.write_text(policy.read_text().replace("maxActiveValue: 10", "maxActiveValue: 99"))
    (stale / "leftover.yaml").write_text("kind: Leftover\n")  # an earlier output's file, listed
    with (stale / ".fivespot-output").open("a") as manifest:
        manifest.write("leftover.yaml\n")
    assert main(["compile", str(EXAMPLE), "--out", str(stale), "--check"]) == 1
    out = capsys.readouterr().out
    assert "--- a/admission/params/agents.yaml" in out
    assert "-  maxActiveValue: 99" in out and "+  maxActiveValue: 10" in out
    assert "--- a/leftover.yaml\n+++ /dev/null" in out
    assert policy.read_text().count("maxActiveValue: 99") == 1  # --check never writes
