"""YAML that would stall or crash the reader is refused on its line: alias bombs, deep nesting,
integers longer than Python converts; by `compile`/`test` and by `check` alike (except that
`check` reads a number as kubectl does, for which no integer is that long)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fivespot.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent-sandbox" / "config"
PLATFORM = ("apiVersion: config.5spot.finos.org/v1alpha1\nkind: Platform\n"
            "metadata: {name: p}\nspec:\n  image: example.com/fivespot:test\n")


def _bomb(levels: int = 12, width: int = 12) -> str:
    lines = ["a0: &a0 [lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


CASES = {
    "bomb": (_bomb(), "bad.yaml:1:1: refused: the document expands to more than 100,000 values "
                      "(aliases that refer to aliases?)"),
    # libyaml itself stops at 1,000 levels ("invalid YAML: exceeded maximum nesting depth").
    "deep": ("x: " + "[" * 500 + "]" * 500 + "\n", "bad.yaml:1:103: refused: nested more than 100 levels deep"),
    "digits": ("n: " + "9" * 5000 + "\n", "bad.yaml:1:4: refused: an integer of 5,000 digits; at most 4,300"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_compile_and_test_refuse_it_on_its_line(case: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    text, expected = CASES[case]
    (tmp_path / "platform.yaml").write_text(PLATFORM)
    (tmp_path / "bad.yaml").write_text(text)
    for argv in (["compile", str(tmp_path), "--out", str(tmp_path.parent / "out")],
                 ["test", str(tmp_path)]):
        assert main(argv) == 2
        assert capsys.readouterr().err.splitlines()[0] == expected


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("policies") / "out"
    assert main(["compile", str(EXAMPLE), "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("case", sorted(set(CASES) - {"digits"}))
def test_check_refuses_it_on_its_line(case: str, tmp_path: Path, policies: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    text, expected = CASES[case]
    (tmp_path / "bad.yaml").write_text(text)
    assert main(["check", "--policies", str(policies), str(tmp_path / "bad.yaml")]) == 2
    assert expected.replace("bad.yaml", str(tmp_path / "bad.yaml")) in capsys.readouterr().err


def test_check_reads_a_number_longer_than_python_converts_as_the_string_kubectl_sends(
        tmp_path: Path, policies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # go-yaml makes an integer past uint64 a float, and one past a float's range the text itself
    (tmp_path / "long.yaml").write_text(
        "apiVersion: 5spot.finos.org/v1alpha1\nkind: ScheduledCapacity\n"
        "metadata: {name: web, namespace: agents}\nspec:\n"
        "  schedule: {apiVersion: spotschedules.5spot.finos.org/v1alpha1, kind: ManualSchedule,"
        " name: m}\n  targetRef: {apiVersion: pools.agents.example.com/v1alpha1,"
        " kind: VirtualMachinePool, name: p}\n"
        f"  capacity: {{path: spec.warmReplicas, activeValue: {'9' * 5000}}}\n")
    assert main(["check", "--policies", str(policies), str(tmp_path / "long.yaml")]) == 1
    assert ('spec.capacity.activeValue: Invalid value: "string": spec.capacity.activeValue in body '
            'must be of type integer: "string"') in capsys.readouterr().out
