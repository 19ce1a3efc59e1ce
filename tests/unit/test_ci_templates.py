"""The config-repo CI templates (examples/ci/ and the root .pre-commit-hooks.yaml) do what they say.

- The pre-commit hooks run under the real pre-commit in a temporary git repo holding a copy of the
  bundled example and its compiled output: they pass on a current repo, and stop a commit whose
  output is stale or whose fixture fails. The hook definitions are read from
  .pre-commit-hooks.yaml itself; only `language` becomes `system` (the fivespot under test, on
  PATH, instead of pre-commit building its own environment from the network).
- The GitHub Actions workflow and the GitLab CI job validate against their published schemas
  (check-jsonschema's vendored copies), and their fivespot steps, run in that same repo, pass on
  a current repo and fail on a stale one.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / "examples" / "ci"
HOOKS = ROOT / ".pre-commit-hooks.yaml"
EXAMPLE = ROOT / "examples" / "agent-sandbox" / "config"
BIN = Path(sys.executable).parent
OUT = "clusters/prod/fivespot"


def run(cwd: Path, *command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", **(env or {})})


@pytest.fixture
def config_repo(tmp_path: Path) -> Path:
    """A git repo laid out as the templates expect: config/ and its compiled OUT, committed."""
    repo = tmp_path / "cluster-config"
    shutil.copytree(EXAMPLE, repo / "config")
    assert run(repo, "fivespot", "compile", "config", "--out", OUT).returncode == 0
    for command in (("git", "init", "-q", "-b", "main"), ("git", "config", "user.email", "ci@example.com"),
                    ("git", "config", "user.name", "CI"), ("git", "add", "-A"),
                    ("git", "commit", "-q", "-m", "config and output")):
        assert run(repo, *command).returncode == 0, command
    return repo


def _stale(repo: Path) -> None:
    """A config change committed without recompiling."""
    tenants = repo / "config" / "tenants.yaml"
    tenants.write_text(tenants.read_text().replace("maxActiveValue: 10", "maxActiveValue: 9", 1))
    assert "maxActiveValue: 9" in tenants.read_text()


def _failing_fixture(repo: Path) -> None:
    fixture = repo / "config" / "fixtures" / "fivespot-ci-failing.yaml"
    fixture.write_text(yaml.safe_dump({
        "apiVersion": "config.5spot.finos.org/v1alpha1", "kind": "Fixture",
        "metadata": {"name": "ci-expects-the-impossible"},
        "spec": {"operation": "CREATE", "expect": {"allowed": True}, "object": {
            "apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
            "metadata": {"name": "x", "namespace": "agents"},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": "w"},
                     "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                                   "kind": "VirtualMachinePool", "name": "p"},
                     "capacity": {"path": "metadata.labels", "activeValue": 1}}}}}))


# --- pre-commit ----------------------------------------------------------------------------------


def _local_hooks(repo: Path) -> None:
    """The template's .pre-commit-config.yaml, its hooks taken from .pre-commit-hooks.yaml."""
    template = yaml.safe_load((CI / "pre-commit-config.yaml").read_text())
    [remote] = template["repos"]
    definitions = {hook["id"]: hook for hook in yaml.safe_load(HOOKS.read_text())}
    hooks = []
    for use in remote["hooks"]:
        hook = {**definitions[use["id"]], "args": use["args"], "language": "system"}
        hook.pop("additional_dependencies", None)
        hooks.append(hook)
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{"repo": "local", "hooks": hooks}]}))


def test_the_hook_manifest_and_the_config_template_are_valid_for_pre_commit() -> None:
    assert run(ROOT, "pre-commit", "validate-manifest", str(HOOKS)).returncode == 0
    assert run(ROOT, "pre-commit", "validate-config", str(CI / "pre-commit-config.yaml")).returncode == 0
    ids = {hook["id"] for hook in yaml.safe_load(HOOKS.read_text())}
    used = {hook["id"] for hook in yaml.safe_load((CI / "pre-commit-config.yaml").read_text())["repos"][0]["hooks"]}
    assert used == ids == {"fivespot-compile-check", "fivespot-test"}


def test_the_pre_commit_hooks_pass_a_current_repo_and_stop_a_stale_output_or_a_failing_fixture(
        config_repo: Path, tmp_path: Path) -> None:
    _local_hooks(config_repo)
    run(config_repo, "git", "add", ".pre-commit-config.yaml")
    run(config_repo, "git", "commit", "-q", "-m", "hooks")
    home = {"PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    passed = run(config_repo, "pre-commit", "run", "--all-files", env=home)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "fivespot compile --check" in passed.stdout and "Passed" in passed.stdout

    _stale(config_repo)
    run(config_repo, "git", "add", "-A")
    stale = run(config_repo, "pre-commit", "run", "fivespot-compile-check", env=home)
    assert stale.returncode == 1
    assert f"{OUT} is stale: run `fivespot compile config --out {OUT}`" in stale.stdout

    run(config_repo, "git", "reset", "-q", "--hard")
    _failing_fixture(config_repo)
    run(config_repo, "git", "add", "-A")
    failing = run(config_repo, "pre-commit", "run", "fivespot-test", env=home)
    assert failing.returncode == 1
    assert "ci-expects-the-impossible" in failing.stdout


# --- GitHub Actions and GitLab CI ----------------------------------------------------------------


@pytest.mark.parametrize("template,schema", [
    ("github-actions.yaml", "vendor.github-workflows"), ("gitlab-ci.yaml", "vendor.gitlab-ci")])
def test_the_ci_template_validates_against_its_published_schema(template: str, schema: str) -> None:
    checked = run(ROOT, "check-jsonschema", "--builtin-schema", schema, str(CI / template))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_github_action_is_pinned_by_full_commit_sha_with_its_tag_beside_it() -> None:
    """A tag can be moved to other code; a commit SHA cannot (OpenSSF Scorecard's
    Pinned-Dependencies). The tag in the comment tells a reader, and Dependabot, which release."""
    lines = [line.strip() for line in (CI / "github-actions.yaml").read_text().splitlines()
             if line.strip().startswith("- uses:")]
    assert lines
    for line in lines:
        assert re.fullmatch(r"- uses: [\w.-]+/[\w.-]+@[0-9a-f]{40}  # v\d+\.\d+\.\d+", line), line


def _github_steps() -> tuple[dict[str, str], list[str]]:
    workflow = yaml.safe_load((CI / "github-actions.yaml").read_text())
    [job] = workflow["jobs"].values()
    commands = [step["run"] for step in job["steps"] if "run" in step and "pip install" not in step["run"]]
    return {k: str(v) for k, v in workflow["env"].items()}, commands


def _gitlab_steps() -> tuple[dict[str, str], list[str]]:
    job: dict[str, Any] = yaml.safe_load((CI / "gitlab-ci.yaml").read_text())["fivespot"]
    return {k: str(v) for k, v in job["variables"].items()}, list(job["script"])


@pytest.mark.parametrize("steps", [_github_steps, _gitlab_steps], ids=["github", "gitlab"])
def test_the_ci_steps_pass_a_current_repo_and_fail_a_stale_one(
        config_repo: Path, steps: Any) -> None:
    variables, commands = steps()
    assert [c.split()[:2] for c in commands[:2]] == [["fivespot", "compile"], ["fivespot", "test"]]
    assert "fivespot audit" in commands[2] and variables["AUDIT_EXPORT"] == ""
    assert (variables["CONFIG_DIR"], variables["OUT_DIR"]) == ("config", OUT)
    _the_audit_step_runs_on_an_export(config_repo, variables, commands[2])
    for command in commands[:2]:
        result = run(config_repo, "bash", "-ec", command, env=variables)
        assert result.returncode == 0, (command, result.stdout, result.stderr)
    _stale(config_repo)
    result = run(config_repo, "bash", "-ec", commands[0], env=variables)
    assert result.returncode == 1 and "is stale" in result.stderr


def _the_audit_step_runs_on_an_export(config_repo: Path, variables: dict[str, str],
                                      command: str) -> None:
    """With AUDIT_EXPORT naming a `kubectl get -o yaml` export, the optional step fails on an
    object the output's policies would deny, and passes when none would be."""
    namespace = yaml.safe_load_all((config_repo / "config").joinpath("tenants.yaml").read_text())
    tenant = next(d for d in namespace if d and d.get("kind") == "TenantPolicy")
    limit = int(tenant["spec"]["maxActiveValue"])
    ns = tenant["spec"]["namespaces"][0]
    consumer = next(d for d in yaml.safe_load_all((config_repo / "config" / "consumers.yaml")
                                                  .read_text()) if d and d.get("kind") == "CapacityConsumer")
    spec = consumer["spec"]
    for value, expected in ((limit, 0), (limit + 1, 1)):
        export = config_repo / "export.yaml"
        export.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [{
            "apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
            "metadata": {"name": "stored", "namespace": ns, "resourceVersion": "7", "uid": "u"},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": "s"},
                     "targetRef": {"apiVersion": f"{spec['group']}/{spec['version']}",
                                   "kind": spec["kind"], "name": "t"},
                     "capacity": {"path": spec["capacityPaths"][0], "activeValue": value}},
            "status": {"phase": "Active"}}]}))
        result = run(config_repo, "bash", "-ec", command,
                     env={**variables, "AUDIT_EXPORT": str(export)})
        assert result.returncode == expected, (value, result.stdout, result.stderr)
