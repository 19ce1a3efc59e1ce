"""The compiler's output is pinned byte for byte, and independent of how the input is laid out."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml

from compiler.output import diff_tree
from compiler.pipeline import compile_repo

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent-sandbox" / "config"
GOLDEN = Path(__file__).parent / "golden" / "agent-sandbox"
NO_CONSUMERS = Path(__file__).parent / "testdata" / "valid-no-consumers"


def test_example_compiles_to_the_golden_output() -> None:
    diff = diff_tree(compile_repo(EXAMPLE).files, GOLDEN)
    assert diff == "", f"compiled output differs from golden (see tests/unit/golden/README.md):\n{diff}"


def _documents(config: Path) -> list[str]:
    texts = []
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
