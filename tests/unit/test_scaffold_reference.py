"""What a new user starts from works, and what they read cannot drift from the models.

`fivespot init` writes a repo that compiles and passes its fixtures; `fivespot schema` accepts
every document fivespot accepts and flags what it refuses; docs/reference/kinds.md is what the models
render today, and its cluster examples are admitted by the compiled CRDs and policies.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
import yaml

from fivespot.compiler.check.fixtures import run_fixtures
from fivespot.compiler.check.objects import check
from fivespot.cli.main import main
from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo
from fivespot.compiler.reference import CLUSTER_EXAMPLES, render
from fivespot.compiler.scaffold import FILES, ScaffoldError, init
from fivespot.compiler.schemas import COMBINED, schema_files
from fivespot.compiler.spec import DEFAULT_IMAGE, DOCUMENT_KINDS, VERSION

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent-sandbox" / "config"


def test_init_writes_a_repo_whose_fixtures_all_pass(tmp_path: Path) -> None:
    repo = tmp_path / "config"
    written = init(repo)
    assert set(FILES) <= set(written)
    results = run_fixtures(repo)
    assert len(results) >= 4 and all(r.passed for r in results)
    assert {bool(r.expect["allowed"]) for r in results} == {True, False}


def test_the_quick_starts_tenant_folder_checks_offline_with_its_deployment_skipped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["init", "my-config"]) == 0
    assert main(["compile", "my-config", "--out", "my-out"]) == 0
    tenant = tmp_path / "team-a"
    tenant.mkdir()
    (tenant / "web.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: team-a}\n"
        "spec:\n  selector: {matchLabels: {app: web}}\n"
        "  template:\n    metadata: {labels: {app: web}}\n"
        "    spec: {containers: [{name: web, image: nginx}]}\n")
    (tenant / "schedule.yaml").write_text(
        "apiVersion: spotschedules.5spot.finos.org/v1alpha1\nkind: ManualSchedule\n"
        "metadata: {name: web, namespace: team-a}\nspec: {enabled: false}\n---\n"
        "apiVersion: 5spot.finos.org/v1alpha1\nkind: ScheduledCapacity\n"
        "metadata: {name: web, namespace: team-a}\nspec:\n"
        "  schedule: {apiVersion: spotschedules.5spot.finos.org/v1alpha1, kind: ManualSchedule,"
        " name: web}\n"
        "  targetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n"
        "  capacity: {path: spec.replicas, activeValue: 3}\n")
    capsys.readouterr()
    assert main(["check", "--policies", "my-out", "team-a/"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[:4] for line in out[1:4]] == [
        ["team-a/schedule.yaml:1", "ManualSchedule/team-a/web", "CREATE", "allowed"],
        ["team-a/schedule.yaml:6", "ScheduledCapacity/team-a/web", "CREATE", "allowed"],
        ["team-a/web.yaml:1", "Deployment/team-a/web", "CREATE", "skipped"]]
    assert out[-2] == "3 objects: 2 allowed, 0 denied, 1 skipped"
    assert out[-1].startswith("assumed: 1 object was decided as if the user's RBAC allowed what "
                              "fivespot-scap-author-rights asks the authorizer")
    (tenant / "schedule.yaml").write_text(
        (tenant / "schedule.yaml").read_text().replace("activeValue: 3", "activeValue: 30"))
    assert main(["check", "--policies", "my-out", "team-a/"]) == 1


def test_init_output_compiles_and_defaults_to_the_image_make_image_builds(tmp_path: Path) -> None:
    init(tmp_path / "config")
    compiled = compile_repo(tmp_path / "config")
    images = {c["image"] for a in compiled.artifacts if a.kind == "Deployment"
              for c in a.obj["spec"]["template"]["spec"]["containers"]}
    assert images == {DEFAULT_IMAGE} and DEFAULT_IMAGE.endswith(f":{VERSION}")


def test_default_image_is_the_name_image_build_gives(tmp_path: Path) -> None:
    text = (ROOT / "image" / "build.py").read_text()
    assert f'IMAGE_NAME: Final = "{DEFAULT_IMAGE.rsplit(":", 1)[0]}"' in text


@pytest.mark.parametrize("existing", ["file", "folder-with-a-file"])
def test_init_refuses_anything_but_a_new_or_empty_folder_and_keeps_what_is_there(
    tmp_path: Path, existing: str
) -> None:
    target = tmp_path / "target"
    if existing == "file":
        target.write_text("mine")
    else:
        target.mkdir()
        (target / "notes.txt").write_text("mine")
    with pytest.raises(ScaffoldError, match="new or empty folder"):
        init(target)
    assert main(["init", str(target)]) == 2
    assert (target.read_text() if existing == "file" else (target / "notes.txt").read_text()) == "mine"
    if existing != "file":
        assert [p.name for p in target.iterdir()] == ["notes.txt"]


def _documents(folder: Path) -> list[dict[str, object]]:
    found = []
    for path in sorted(folder.rglob("*.yaml")):
        found += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return found


def _repo(folder: str, tmp_path: Path) -> Path:
    if folder == "scaffold":
        init(tmp_path / "repo")
        return tmp_path / "repo"
    return ROOT / "examples" / folder / "config"


REPOS = ["scaffold", "agent-sandbox", "trading-desk"]


def test_the_scaffold_and_the_examples_together_use_every_config_kind(tmp_path: Path) -> None:
    kinds = {d["kind"] for folder in REPOS for d in _documents(_repo(folder, tmp_path / folder))}
    assert kinds == set(DOCUMENT_KINDS)


@pytest.mark.parametrize("folder", REPOS)
def test_the_combined_schema_accepts_every_document_fivespot_accepts(tmp_path: Path, folder: str) -> None:
    schema = json.loads(schema_files()[COMBINED])
    validator = jsonschema.Draft202012Validator(schema)
    documents = _documents(_repo(folder, tmp_path))
    assert documents and {d["kind"] for d in documents} <= set(DOCUMENT_KINDS)
    for document in documents:
        errors = list(validator.iter_errors(document))
        assert not errors, (document["metadata"], errors[0].message)


@pytest.mark.parametrize("change,where", [
    (lambda d: d["spec"].__setitem__("controllerReplica", 2), "controllerReplica"),
    (lambda d: d["spec"]["webhook"].__setitem__("certificate", "self-managed"), "certificate"),
    (lambda d: d["spec"].__setitem__("controllerReplicas", 11), "11"),
    (lambda d: d.__setitem__("kind", "Platfrom"), "Platfrom"),
])
def test_the_schema_flags_what_the_loader_refuses(change: object, where: str) -> None:
    platform = yaml.safe_load((EXAMPLE / "platform.yaml").read_text())
    change(platform)  # type: ignore[operator]
    validator = jsonschema.Draft202012Validator(json.loads(schema_files()[COMBINED]))
    errors = [str(e.message) + str(list(e.path)) for e in validator.iter_errors(platform)]
    assert errors and any(where in e for e in errors), errors


def test_schema_command_writes_one_schema_per_kind_and_the_combined_one(tmp_path: Path) -> None:
    assert main(["schema", "--out", str(tmp_path / "schemas")]) == 0
    names = {p.name for p in (tmp_path / "schemas").iterdir()}
    assert names == {COMBINED, *(f"{k.lower()}.schema.json" for k in DOCUMENT_KINDS)}


def test_the_committed_reference_is_what_the_models_render() -> None:
    committed = (ROOT / "docs" / "reference" / "kinds.md").read_text()
    assert committed == render(), "docs/reference/kinds.md is stale: run `make reference`"


def test_the_reference_documents_every_field_of_every_kind() -> None:
    text = render()
    for kind in [*DOCUMENT_KINDS, "ScheduledCapacity", "ManualSchedule", "TimeBasedSpotSchedule",
                 "CapitalMarketsSchedule", "ScheduledMachine", "TenantCapacityLimit"]:
        assert f"\n### {kind}\n" in text
    for field in ("`spec.controllerReplicas`", "`spec.webhook.certificate.mode`",
                  "`spec.capacityPaths`", "`spec.capacity.activeValue`", "`status.phase`"):
        assert field in text


def test_the_references_cluster_examples_are_admitted_by_the_compiled_output(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    init(repo)
    providers = repo / "providers.yaml"
    providers.write_text(providers.read_text().replace(
        "    - TimeBasedSpotSchedule", "    - TimeBasedSpotSchedule\n    - CapitalMarketsSchedule"))
    out = tmp_path / "out"
    write_tree(compile_repo(repo).files, out)
    objects = tmp_path / "objects.yaml"
    objects.write_text("---\n".join(CLUSTER_EXAMPLES.values()))
    results = check([out], [objects])
    assert len(results) == len(CLUSTER_EXAMPLES)
    for result in results:
        assert result.verdict.allowed, (result, result.verdict)


def test_the_compiled_readme_is_well_formed_markdown(tmp_path: Path) -> None:
    """Headings stand alone between blank lines: none glued to a list or table line."""
    write_tree(compile_repo(EXAMPLE).files, tmp_path / "out")
    lines = (tmp_path / "out" / "README.md").read_text().split("\n")
    for i, line in enumerate(lines):
        assert "###" not in line or line.startswith("#"), f"line {i + 1}: {line[:60]}"
        if line.startswith("#"):
            assert i == 0 or lines[i - 1] == "", f"line {i + 1}: no blank line before {line}"
            assert lines[i + 1] == "", f"line {i + 1}: no blank line after {line}"


HIDING_PROVIDER = """\
apiVersion: config.5spot.finos.org/v1alpha1
kind: ScheduleProvider
metadata: {name: hiding}
spec:
  custom:
    - kind: HidingSchedule
      specSchema:
        type: object
        description: "A schedule <!-- hides the rest & more"
        properties:
          window:
            type: string
            maxLength: 10
            description: "<b>bold</b> | <!--"
            x-kubernetes-validations:
              - rule: "self != '` <!--'"
                message: "not `<!--`"
"""


def test_user_text_in_the_compiled_readme_cannot_hide_its_sections(tmp_path: Path) -> None:
    # A description or a rule holding `<!--` must not open an HTML comment that hides the
    # admission policies and RBAC matrix from a reviewer reading the rendered README.
    shutil.copytree(EXAMPLE, tmp_path / "config")
    (tmp_path / "config" / "hiding.yaml").write_text(HIDING_PROVIDER)
    readme = compile_repo(tmp_path / "config").files["README.md"].decode()
    assert "| `spec` | object | yes |  | A schedule &lt;!-- hides the rest &amp; more |" in readme
    assert "| &lt;b&gt;bold&lt;/b&gt; \\| &lt;!-- |" in readme
    rule = "- `spec.window`: not `&lt;!--` — ``self != '` <!--'``\n"
    assert rule in readme
    # the only `<!--` left is inside that code span, two backticks long: the one inside cannot
    # end it, so it is shown, not read as HTML
    assert "<!--" not in readme.replace(rule, "")
    assert "\n## Admission policies\n" in readme and "\n## RBAC matrix\n" in readme


def test_the_docs_state_the_examples_fixture_count() -> None:
    import re

    stated = re.search(r"agent-sandbox example carries (\d+) fixtures",
                       (ROOT / "docs" / "reference" / "check.md").read_text())
    assert stated is not None
    assert int(stated.group(1)) == len(run_fixtures(EXAMPLE))


def test_every_flag_of_every_command_has_help() -> None:
    import argparse

    from fivespot.cli.main import RUNTIME_COMMANDS, build_parser

    missing: set[str] = set()

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")
            elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)) \
                    and not action.help:
                missing.add(f"{path} {'/'.join(action.option_strings) or action.dest}")

    for command in ["compile", *RUNTIME_COMMANDS]:
        walk(build_parser([command]), "fivespot")
    assert not missing, sorted(missing)


# Each command of the README's quick start (the tutorial's run in tests/integration/test_docs_commands.py), and the test that runs it as written there. The
# offline ones run here; the others are run by the integration test named, which must contain
# the invocation shown.
QUICK_START = {
    "make install": ("Makefile", "$(STAMP):"),
    "fivespot init my-config": ("here", ""),
    "fivespot test my-config": ("here", ""),
    "fivespot compile my-config --out my-out": ("here", ""),
    "fivespot dev my-config": ("tests/integration/test_dev.py", '"-m", "fivespot", "dev"'),
    "make image": ("tests/conftest-image", ""),
    "make kind CONFIG=my-config": ("tests/integration/test_install.py", '"kind.sh"'),
    "fivespot install my-out": ("tests/integration/test_install.py", 'fivespot("install"'),
}


def _quick_start_commands() -> list[str]:
    import re

    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        for line in block.splitlines():
            command = line.split("#", 1)[0].strip()
            commands += [part.strip() for part in command.split("&&") if part.strip()
                         and not part.strip().startswith(".")]
    return commands


def test_the_readme_quick_start_uses_only_commands_the_suite_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import shlex

    commands = _quick_start_commands()
    assert commands == list(QUICK_START), "a quick-start command without a test that runs it"
    monkeypatch.chdir(tmp_path)
    for command, (where, needle) in QUICK_START.items():
        if where == "here":
            assert main(shlex.split(command)[1:]) == 0, command
        elif where == "tests/conftest-image":
            make = (ROOT / "Makefile").read_text()
            built = (ROOT / "tests" / "integration" / "conftest.py").read_text()
            assert "image/build.py build --out build/image --reuse" in make
            assert '"image" / "build.py"), "build", "--out"' in built and '"--reuse"' in built
        else:
            assert needle in (ROOT / where).read_text(), f"{command}: {where} does not run it"
    assert "4 fixtures: 4 passed, 0 failed" in capsys.readouterr().out
    assert (tmp_path / "my-out" / "kustomization.yaml").exists()


def test_every_config_example_of_the_reference_is_a_valid_document() -> None:
    from fivespot.compiler.reference import CONFIG_EXAMPLES

    assert set(CONFIG_EXAMPLES) == set(DOCUMENT_KINDS)
    for kind, text in CONFIG_EXAMPLES.items():
        document = yaml.safe_load(text)
        assert document["kind"] == kind
        DOCUMENT_KINDS[kind].model_validate(document)
