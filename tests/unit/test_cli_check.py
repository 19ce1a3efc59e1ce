"""`fivespot check` and `fivespot test`: verdict exit codes, the JSON shape, and every bad-input
case (exit 2) with its exact message."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fivespot.cli.main import main
from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent-sandbox" / "config"

GOOD: dict[str, Any] = {
    "apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
    "metadata": {"name": "warm-pool", "namespace": "agents"},
    "spec": {
        "schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                     "kind": "ManualSchedule", "name": "m"},
        "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                      "kind": "VirtualMachinePool", "name": "p"},
        "capacity": {"path": "spec.warmReplicas", "activeValue": 5},
    },
}


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("out")
    write_tree(compile_repo(EXAMPLE).files, out)
    return out


def write(path: Path, *documents: Any) -> Path:
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path


@pytest.fixture()
def forked(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each `checkpool.run` of the test forked its workers (False: it fell back to one
    process)."""
    from fivespot.compiler.check import pool as checkpool

    found: list[bool] = []
    real = checkpool.run

    def spied(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        found.append(result is not None)
        return result

    monkeypatch.setattr(checkpool, "run", spied)
    return found


def more_policies(tmp_path: Path, *objects: Any) -> Path:
    """A folder of policy objects to pass as a second --policies."""
    folder = tmp_path / "policies"
    folder.mkdir()
    write(folder / "more.yaml", *objects)
    return folder


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_an_allowed_object_exits_zero_with_a_table(out_dir: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    objects = write(tmp_path / "objects.yaml", GOOD)
    code, out, _ = run(capsys, "check", "--policies", str(out_dir), str(objects))
    assert code == 0
    assert "ScheduledCapacity/agents/warm-pool  CREATE     allowed" in out
    assert out.rstrip().splitlines()[-2:] == ["1 object: 1 allowed, 0 denied", ASSUMED_ONE]


ASSUMED_ONE = ("assumed: 1 object was decided as if the user's RBAC allowed what "
               "fivespot-scap-author-rights asks the authorizer (nothing offline knows it; the API "
               "server asks for real): state the user's roles with --user-roles ROLES.yaml")


def test_a_denied_object_exits_one_and_json_has_the_issue_shape(
        out_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = json.loads(json.dumps(GOOD))
    bad["spec"]["capacity"]["activeValue"] = 11
    objects = write(tmp_path / "objects.yaml", bad)
    old = write(tmp_path / "old.yaml", GOOD)
    code, out, _ = run(capsys, "check", "--policies", str(out_dir), "--old", str(old), "-o", "json",
                       str(objects))
    assert code == 1
    assert json.loads(out) == {"results": [{
        "object": {"apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
                   "namespace": "agents", "name": "warm-pool"},
        "source": {"file": str(objects), "line": 1},
        "operation": "UPDATE", "allowed": False,
        "violations": [{
            "source": "vap", "policy": "fivespot-tenant-limits", "field": "spec.capacity.activeValue",
            "message": DENIAL}],
        "warnings": [],
        "status": {"code": 403, "reason": "Forbidden",
                   "message": f'scheduledcapacities.5spot.finos.org "warm-pool" is forbidden: {DENIAL}',
                   "causes": [{"message": DENIAL}]},
        "authorizerAssumed": ["fivespot-scap-author-rights"]}]}


DENIAL = ("ValidatingAdmissionPolicy 'fivespot-tenant-limits' with binding "
          "'fivespot-tenant-limits-agents' denied request: fivespot-tenant-limits: "
          "spec.capacity.activeValue 11 exceeds the limit 10 of TenantPolicy agents; "
          "set it to at most 10")


def test_unreadable_yaml_exits_two_with_its_position(out_dir: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    objects = tmp_path / "broken.yaml"
    objects.write_text("kind: ScheduledCapacity\nmetadata: [unclosed\n")
    code, out, err = run(capsys, "check", "--policies", str(out_dir), str(objects))
    assert code == 2 and out == ""
    # libyaml's words, as `compile` reports the same text
    assert err == (f"{objects}:3:1: invalid YAML: did not find expected ',' or ']' (while "
                   "parsing a flow sequence started at line 2, column 11)\n"
                   "1 error; nothing was checked\n")


@pytest.mark.parametrize(("text", "where", "problem"), [
    ("apiVersion: v1\nkind: [\n", "3:1", "did not find expected node content"),
    ('kind: ScheduledCapacity\nmetadata: "unclosed\n', "2:11",
     "found unexpected end of stream (while scanning a quoted scalar that starts here)"),
])
def test_unreadable_yaml_shows_only_fivespots_message_on_stderr_as_a_whole_process(
        out_dir: Path, tmp_path: Path, text: str, where: str, problem: str) -> None:
    # rapidyaml, tried first, prints its own C++ diagnostic to file descriptor 2 before raising
    # (`line=2 col=1 (8B): ERROR: [parse] ...`): only a real process shows whether it leaks
    objects = tmp_path / "broken.yaml"
    objects.write_text(text)
    done = subprocess.run([sys.executable, "-m", "fivespot", "check", "--policies",
                           str(out_dir), str(objects)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"{objects}:{where}: invalid YAML: {problem}\n"
                           "1 error; nothing was checked\n")


def test_a_missing_objects_file_exits_two(out_dir: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "check", "--policies", str(out_dir), str(tmp_path / "nope.yaml"))
    assert code == 2
    assert err == f"{tmp_path / 'nope.yaml'}:0:0: cannot read: no such file\n1 error; nothing was checked\n"


KNOWN = (
    "CapitalMarketsSchedule (spotschedules.5spot.finos.org/v1alpha1), CompositeSchedule "
    "(spotschedules.5spot.finos.org/v1alpha1), ManualSchedule "
    "(spotschedules.5spot.finos.org/v1alpha1), ScheduledCapacity (5spot.finos.org/v1alpha1), "
    "ScheduledMachine (5spot.finos.org/v1beta1), TenantCapacityLimit "
    "(policy.5spot.finos.org/v1alpha1), TimeBasedSpotSchedule "
    "(spotschedules.5spot.finos.org/v1alpha1)")
DEPLOYMENT: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "Deployment",
                              "metadata": {"name": "web", "namespace": "agents"}}
CONFIG_MAP: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}


def test_objects_no_policy_applies_to_are_skipped_and_the_others_still_checked(
        out_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = write(tmp_path / "objects.yaml", DEPLOYMENT, GOOD, CONFIG_MAP)
    code, out, _ = run(capsys, "check", "--policies", str(out_dir), str(objects))
    assert code == 0
    lines = out.splitlines()
    assert lines[1].split() == [f"{objects}:1", "Deployment/agents/web", "CREATE", "skipped",
                                "not", "checked:", "no", "CRD", "or", "ValidatingAdmissionPolicy",
                                "given", "covers", "the", "API", "group", "'apps'", "of",
                                "Deployment"]
    assert lines[2].split()[1:4] == ["ScheduledCapacity/agents/warm-pool", "CREATE", "allowed"]
    assert lines[3].endswith("covers the API group 'core' of ConfigMap")
    assert lines[-2:] == ["3 objects: 1 allowed, 0 denied, 2 skipped", ASSUMED_ONE]
    code, out, _ = run(capsys, "check", "--policies", str(out_dir), "-o", "json", str(objects))
    shown = json.loads(out)["results"]
    assert [r.get("skipped", "")[:12] for r in shown] == ["not checked:", "", "not checked:"]
    assert [r["allowed"] for r in shown] == [True, True, True]


def test_an_old_version_of_an_object_no_policy_covers_needs_no_new_one(
        out_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a pull request that deletes a ConfigMap beside the tenant's ScheduledCapacity
    objects = write(tmp_path / "new.yaml", GOOD)
    old = write(tmp_path / "old.yaml", GOOD, CONFIG_MAP)
    code, out, _ = run(capsys, "check", "--policies", str(out_dir), "--old", str(old), str(objects))
    assert code == 0 and out.rstrip().splitlines()[-2:] == ["1 object: 1 allowed, 0 denied",
                                                             ASSUMED_ONE]


@pytest.mark.parametrize("jobs", ["0", "-3", "two"])
def test_jobs_must_be_a_whole_number_of_processes(
        out_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], jobs: str) -> None:
    objects = write(tmp_path / "objects.yaml", GOOD)
    with pytest.raises(SystemExit) as raised:
        main(["check", "-j", jobs, "--policies", str(out_dir), str(objects)])
    assert raised.value.code == 2
    assert f"argument -j/--jobs: {jobs!r}: expected a whole number of processes, 1 or more" in (
        capsys.readouterr().err)


def test_a_kind_unknown_in_an_api_group_the_policies_define_exits_two(
        out_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = write(tmp_path / "objects.yaml", {**GOOD, "apiVersion": "5spot.finos.org/v1"})
    code, _, err = run(capsys, "check", "--policies", str(out_dir), str(objects))
    assert code == 2
    assert err == (f"{objects}:2:1: kind: no matches for kind \"ScheduledCapacity\" in version "
                   f"\"5spot.finos.org/v1\", as kubectl would say (the policies define {KNOWN})\n"
                   "1 error; nothing was checked\n")


def test_a_kind_a_policy_may_match_but_no_crd_defines_exits_two_saying_why(
        out_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policies = more_policies(tmp_path, {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "replicas-cap"},
        "spec": {"matchConstraints": {"resourceRules": [{
            "apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
            "resources": ["deployments"]}]},
            "validations": [{"expression": "object.spec.replicas <= 5"}]}})
    objects = write(tmp_path / "objects.yaml", DEPLOYMENT, CONFIG_MAP)
    code, _, err = run(capsys, "check", "--policies", str(out_dir), "--policies", str(policies),
                       str(objects))
    assert code == 2
    assert err == (f"{objects}:2:1: kind: no matches for kind \"Deployment\" in version "
                   f"\"apps/v1\", as kubectl would say (the policies define {KNOWN}); a "
                   "ValidatingAdmissionPolicy given may match its API group, and check decides "
                   "only the custom resources of the CRDs given\n1 error; nothing was checked\n")


def test_a_folder_of_objects_is_read_as_kubectl_reads_one_yaml_and_json_hidden_ones_skipped(
        out_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tenant = tmp_path / "tenant"
    (tenant / "a").mkdir(parents=True)
    (tenant / ".git").mkdir()
    second = {**GOOD, "metadata": {"name": "second", "namespace": "agents"},
              "spec": {**GOOD["spec"], "targetRef": {**GOOD["spec"]["targetRef"], "name": "q"}}}
    write(tenant / "b.yaml", second)
    write(tenant / "a" / "first.yml", GOOD, DEPLOYMENT)
    write(tenant / ".hidden.yaml", {**GOOD, "metadata": {"name": "hidden"}})
    write(tenant / ".git" / "config.yaml", {**GOOD, "metadata": {"name": "in-git"}})
    (tenant / "README.md").write_text("kind: ScheduledCapacity\n")
    (tenant / "c.json").write_text(json.dumps(CONFIG_MAP))
    code, out, _ = run(capsys, "check", "--policies", str(out_dir), "-o", "json", str(tenant))
    assert code == 0
    assert [(r["source"]["file"], r["object"]["name"]) for r in json.loads(out)["results"]] == [
        (str(tenant / "a" / "first.yml"), "warm-pool"), (str(tenant / "a" / "first.yml"), "web"),
        (str(tenant / "b.yaml"), "second"), (str(tenant / "c.json"), "c")]


def test_a_folder_without_yaml_files_exits_two(out_dir: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("kind: ScheduledCapacity\n")
    code, _, err = run(capsys, "check", "--policies", str(out_dir), str(empty))
    assert code == 2
    assert err == (f"{empty}:0:0: no .yaml, .yml or .json file in this folder (hidden ones "
                   "are skipped)\n1 error; nothing was checked\n")


def test_a_missing_namespace_object_a_selector_needs_exits_two(
        out_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policies = more_policies(tmp_path, {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "gold-only"},
        "spec": {"policyName": "fivespot-scap-tenancy", "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {"tier": "gold"}}}}})
    objects = write(tmp_path / "objects.yaml", GOOD)
    namespaces = write(tmp_path / "ns.yaml", {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": "other"}})
    code, _, err = run(capsys, "check", "--policies", str(out_dir), "--policies", str(policies),
                       "--namespaces", str(namespaces), str(objects))
    assert code == 2
    assert err == (
        f"{objects}:5:3: metadata.namespace: namespace 'agents' has no Namespace object in "
        f"{namespaces}, and ValidatingAdmissionPolicyBinding 'gold-only' needs its labels to "
        "decide\n1 error; nothing was checked\n")
    write(namespaces, {"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": "agents", "labels": {"tier": "gold"}}})
    code, _, _ = run(capsys, "check", "--policies", str(out_dir), "--policies", str(policies),
                     "--namespaces", str(namespaces), str(objects))
    assert code == 0


def test_an_old_object_without_a_new_version_exits_two(out_dir: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    objects = write(tmp_path / "objects.yaml", GOOD)
    other = json.loads(json.dumps(GOOD))
    other["metadata"]["name"] = "gone"
    old = write(tmp_path / "old.yaml", other)
    code, _, err = run(capsys, "check", "--policies", str(out_dir), "--old", str(old), str(objects))
    assert code == 2
    assert err == (f"{old}:4:3: metadata.name: old object ScheduledCapacity agents/gone has no new "
                   "version among the objects to check\n1 error; nothing was checked\n")


def test_fivespot_test_passes_on_the_bundled_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "test", str(EXAMPLE))
    assert code == 0
    assert out.rstrip().splitlines()[-2:] == [
        "94 fixtures: 94 passed, 0 failed",
        "assumed: 39 fixtures were decided as if the user's RBAC allowed what "
        "fivespot-scap-author-rights asks the authorizer (nothing offline knows it; the API server "
        "asks for real): state the user's rules with a fixture's spec.userRules"]


def test_fivespot_test_fails_a_fixture_with_the_wrong_expectation(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config"
    config.mkdir()
    for source in EXAMPLE.glob("*.yaml"):
        (config / source.name).write_text(source.read_text())
    write(config / "fixture.yaml", {
        "apiVersion": "config.5spot.finos.org/v1alpha1", "kind": "Fixture",
        "metadata": {"name": "wrong"},
        "spec": {"object": GOOD, "expect": {"allowed": False, "violations": [
            {"policy": "fivespot-tenant-limits", "field": "spec.capacity.activeValue"}]}}})
    code, out, _ = run(capsys, "test", str(config), "-o", "json")
    assert code == 1
    report = json.loads(out)
    assert report["failed"] == 1
    assert report["fixtures"][0]["problems"] == [
        "expected denied, got allowed",
        'expected violation {"policy": "fivespot-tenant-limits", "field": '
        '"spec.capacity.activeValue"} not found']
    assert report["fixtures"][0]["source"] == {"file": "fixture.yaml", "line": 1}
    assert report["fixtures"][0]["expected"] == {"allowed": False, "violations": [
        {"policy": "fivespot-tenant-limits", "field": "spec.capacity.activeValue"}]}  # as given
    code, out, _ = run(capsys, "test", str(config))
    assert code == 1 and "FAIL wrong (fixture.yaml:1:1):\n  - expected denied, got allowed" in out


UNKNOWN_AND_DUPLICATE = """\
# a comment first: the object starts on line 2
apiVersion: 5spot.finos.org/v1alpha1
kind: ScheduledCapacity
metadata: {name: warm-pool, namespace: agents}
spec:
  zzz: 1
  schedule: {apiVersion: spotschedules.5spot.finos.org/v1alpha1, kind: ManualSchedule, name: m}
  targetRef: {apiVersion: pools.agents.example.com/v1alpha1, kind: VirtualMachinePool, name: p}
  capacity: {path: spec.warmReplicas, activeValue: 5, unit: pods}
  enabled: true
  enabled: false
"""


def test_unknown_and_duplicate_fields_are_denied_by_default_as_the_strict_decoder_words_it(
        out_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = tmp_path / "objects.yaml"
    objects.write_text(UNKNOWN_AND_DUPLICATE)
    code, out, _ = run(capsys, "check", "--policies", str(out_dir), "-o", "json", str(objects))
    assert code == 1
    result = json.loads(out)["results"][0]
    assert result["source"] == {"file": str(objects), "line": 2}
    assert [(v["field"], v["message"]) for v in result["violations"]] == [
        ("spec.enabled", 'duplicate field "spec.enabled"'),
        ("spec.capacity.unit", 'unknown field "spec.capacity.unit"'),
        ("spec.zzz", 'unknown field "spec.zzz"')]
    assert result["status"] == {
        "code": 400, "reason": "BadRequest", "causes": [],
        "message": 'ScheduledCapacity in version "v1alpha1" cannot be handled as a '
                   'ScheduledCapacity: strict decoding error: duplicate field "spec.enabled", '
                   'unknown field "spec.capacity.unit", unknown field "spec.zzz"'}


@pytest.mark.parametrize(("mode", "warnings"), [
    ("warn", ['duplicate field "spec.enabled"', 'unknown field "spec.capacity.unit"',
              'unknown field "spec.zzz"']),
    ("Ignore", []),
])
def test_field_validation_warn_and_ignore_allow_them_as_kubectl_validate_warn_and_false_do(
        out_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str,
        warnings: list[str]) -> None:
    objects = tmp_path / "objects.yaml"
    objects.write_text(UNKNOWN_AND_DUPLICATE)
    code, out, _ = run(capsys, "check", "--policies", str(out_dir), "--field-validation", mode,
                       "-o", "json", str(objects))
    assert code == 0
    result = json.loads(out)["results"][0]
    assert result["allowed"] and result["warnings"] == warnings and "status" not in result


def test_an_unknown_field_validation_mode_is_a_usage_error(
        out_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = write(tmp_path / "objects.yaml", GOOD)
    with pytest.raises(SystemExit) as raised:
        main(["check", "--policies", str(out_dir), "--field-validation", "lax", str(objects)])
    assert raised.value.code == 2
    assert "'lax': expected one of Strict, Warn, Ignore" in capsys.readouterr().err


def test_the_table_names_each_object_by_file_and_line_and_prints_the_servers_message(
        out_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = json.loads(json.dumps(GOOD))
    bad["metadata"]["name"] = "second"
    bad["spec"]["capacity"]["activeValue"] = 11
    objects = write(tmp_path / "objects.yaml", GOOD, bad)
    code, out, _ = run(capsys, "check", "--policies", str(out_dir), str(objects))
    assert code == 1
    lines = out.splitlines()
    assert lines[1].startswith(f"{objects}:1 ")
    assert lines[2].startswith(f"{objects}:19 ")
    assert (f'{objects}:19: Error from server (Forbidden): scheduledcapacities.5spot.finos.org '
            f'"second" is forbidden: ValidatingAdmissionPolicy \'fivespot-tenant-limits\'') in out


def _many(count: int) -> list[dict[str, Any]]:
    """`count` objects, each on its own pool; every seventh denied by its schema, two pairs on
    one pool each (one of each pair governed), one in a List."""
    objects = []
    for index in range(count):
        obj = json.loads(json.dumps(GOOD))
        obj["metadata"]["name"] = f"pool-{index}"
        obj["spec"]["targetRef"]["name"] = f"sandboxes-{index}"
        if index % 7 == 3:
            obj["spec"]["capacity"]["activeValue"] = -1
        objects.append(obj)
    objects[-1]["spec"]["targetRef"]["name"] = "sandboxes-11"
    objects[-2]["spec"]["targetRef"]["name"] = "sandboxes-30"
    objects[500] = {"apiVersion": "v1", "kind": "List", "items": [objects[500]]}
    return objects


def test_a_large_input_read_and_decided_on_workers_gives_the_same_results_as_one_process(
        out_dir: Path, tmp_path: Path, forked: list[bool]) -> None:
    from fivespot.compiler.check import render
    from fivespot.compiler.check.objects import check

    many = _many(1200)
    objects = write(tmp_path / "objects.yaml", *many)
    with objects.open("a") as stream:  # a duplicate field and a YAML anchor: the reference path
        stream.write("---\napiVersion: 5spot.finos.org/v1alpha1\nkind: ScheduledCapacity\n"
                     "metadata: {name: &n anchored, namespace: agents}\n"
                     "spec: {enabled: true, enabled: false}\n")
    old = write(tmp_path / "old.yaml", many[20], many[-1])
    policies = [out_dir]
    alone = check(policies, [objects], old, jobs=1, cache=False)
    apart = check(policies, [objects], old, jobs=2, cache=False)
    assert forked == [True]  # one process does not fork; two do, and nothing fell back
    assert render.render_check_json(apart) == render.render_check_json(alone)
    assert render.render_check_table(apart) == render.render_check_table(alone)
    assert sum(not r.verdict.allowed for r in apart) > 170
    assert any("is defined at" in v.message for r in apart for v in r.verdict.violations)
    assert any("is defined at" in w for r in apart for w in r.verdict.warnings)  # the UPDATE


def test_a_large_input_mixing_kinds_no_policy_applies_to_is_still_decided_on_workers(
        out_dir: Path, tmp_path: Path, forked: list[bool]) -> None:
    from fivespot.compiler.check import render
    from fivespot.compiler.check.objects import check

    mixed: list[Any] = []
    for index, obj in enumerate(_many(900)):
        mixed += [obj, {**DEPLOYMENT, "metadata": {"name": f"web-{index}", "namespace": "agents"}}]
    objects = write(tmp_path / "objects.yaml", *mixed)
    old = write(tmp_path / "old.yaml", mixed[1])
    alone = check([out_dir], [objects], old, jobs=1, cache=False)
    apart = check([out_dir], [objects], old, jobs=2, cache=False)
    assert forked == [True]
    assert render.render_check_table(apart) == render.render_check_table(alone)
    assert render.render_check_json(apart) == render.render_check_json(alone)
    assert [r.skipped != "" for r in apart] == [o["kind"] == "Deployment" for o in mixed]
    assert apart[1].operation == "UPDATE"  # its old version given: an update, still skipped


def test_a_problem_in_a_large_input_is_reported_as_one_process_reports_it(
        out_dir: Path, tmp_path: Path) -> None:
    from fivespot.compiler.check.objects import check
    from fivespot.compiler.diagnostics import InputError

    many = _many(1200)
    many[1100]["kind"] = "NoSuchKind"
    objects = write(tmp_path / "objects.yaml", *many)
    with objects.open("a") as stream:
        stream.write("---\nkind: [unclosed\n")
    reported = []
    for jobs in (1, 2):
        with pytest.raises(InputError) as raised:
            check([out_dir], [objects], jobs=jobs, cache=False)
        reported.append([str(d) for d in raised.value.diagnostics])
    assert reported[0] == reported[1]
    assert len(reported[0]) == 1 and "invalid YAML" in reported[0][0]


def test_a_file_that_is_not_utf_8_is_refused_at_the_first_byte_that_is_not(
        out_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = tmp_path / "latin1.yaml"
    objects.write_bytes(b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: caf\xe9}\n")
    code, _, err = run(capsys, "check", "--policies", str(out_dir), str(objects))
    assert code == 2
    assert err == (f"{objects}:3:21: not UTF-8: byte 0xe9 cannot start or continue a character "
                   "here; save the file as UTF-8, as kubectl reads it\n1 error; nothing was checked\n")


def test_fivespot_test_on_a_repo_that_does_not_compile_runs_no_fixture(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "platform.yaml").write_text("apiVersion: config.5spot.finos.org/v1alpha1\n"
                                            "metadata: {name: p}\n")
    code, _, err = run(capsys, "test", str(tmp_path))
    assert code == 2
    assert err.splitlines()[0].endswith("kind: kind is missing; expected one of Platform, "
                                        "CapacityConsumer, ScheduleProvider, TenantPolicy, "
                                        "MachineProvisioning, Fixture")
    assert err.splitlines()[-1] == "1 error; no fixture was run"


def test_objects_are_read_from_standard_input_for_a_dash_as_kubectl_reads_them(
        out_dir: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "fivespot", "check", "--policies",
                           str(out_dir), "-o", "json", "-"],
                          input=yaml.safe_dump(GOOD).replace("\n", "\r\n"), capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["results"][0]["source"] == {"file": "STDIN", "line": 1}


_MANIFEST_FIXTURE = """\
apiVersion: config.5spot.finos.org/v1alpha1
kind: Fixture
metadata: {{name: {name}}}
spec:
  object:
    apiVersion: 5spot.finos.org/v1alpha1
    kind: ScheduledCapacity
    metadata: {{name: warm-pool, namespace: agents}}
    spec:
      schedule: {{apiVersion: spotschedules.5spot.finos.org/v1alpha1, kind: ManualSchedule, name: m}}
      targetRef: {{apiVersion: pools.agents.example.com/v1alpha1, kind: VirtualMachinePool, name: p}}
      capacity: {{path: spec.warmReplicas, activeValue: {active}}}
{extra}  expect: {{allowed: {allowed}}}
"""
FIXTURES_AS_MANIFESTS = "---\n".join([
    _MANIFEST_FIXTURE.format(name="one-e-one-is-ten", active="1e1", extra="", allowed="true"),
    _MANIFEST_FIXTURE.format(name="a-number-is-no-node-name", active="5",
                             extra="      nodeName: 1e1\n", allowed="false"),
])


def test_a_fixtures_objects_are_typed_as_kubectl_sends_them_as_check_types_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config"
    config.mkdir()
    for source in EXAMPLE.glob("*.yaml"):
        (config / source.name).write_text(source.read_text())
    (config / "manifests.yaml").write_text(FIXTURES_AS_MANIFESTS)
    code, out, _ = run(capsys, "test", str(config), "-o", "json")
    report = json.loads(out)
    mine = {f["name"]: f for f in report["fixtures"]}
    assert mine["one-e-one-is-ten"]["passed"] and mine["a-number-is-no-node-name"]["passed"]
    assert code == 0


# --- the user's RBAC: --user-roles -----------------------------------------------------------------


def _role(kind: str, rules: Any, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
            "metadata": {"name": "author", **meta}, "rules": rules}


PATCH_POOLS = {"apiGroups": ["pools.agents.example.com"], "resources": ["virtualmachinepools"],
               "verbs": ["patch"]}


def test_user_roles_decide_the_authorizer_checks_and_nothing_is_assumed(
        out_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = write(tmp_path / "objects.yaml", GOOD)
    reader = write(tmp_path / "reader.yaml", _role("Role", [{**PATCH_POOLS, "verbs": ["get"]}],
                                                    namespace="agents"))
    code, out, _ = run(capsys, "check", "--policies", str(out_dir), "--user-roles", str(reader),
                       str(objects))
    assert code == 1
    assert ("fivespot-scap-author-rights: you may not patch "
            'virtualmachinepools.pools.agents.example.com "p" in namespace agents') in out
    assert "assumed:" not in out
    for patcher in (_role("Role", [PATCH_POOLS], namespace="agents"),
                    _role("ClusterRole", [PATCH_POOLS])):
        roles = write(tmp_path / "patcher.yaml", patcher)
        code, out, _ = run(capsys, "check", "--policies", str(out_dir), "--user-roles",
                           str(roles), str(objects))
        assert code == 0 and out.rstrip().endswith("1 object: 1 allowed, 0 denied")
    elsewhere = write(tmp_path / "elsewhere.yaml", _role("Role", [PATCH_POOLS], namespace="team-b"))
    code, _, _ = run(capsys, "check", "--policies", str(out_dir), "--user-roles", str(elsewhere),
                     str(objects))
    assert code == 1


@pytest.mark.parametrize(("documents", "problem"), [
    ([DEPLOYMENT], ":2:1: kind: expected Role or ClusterRole objects (rbac.authorization.k8s.io/v1), "
                   "the user's, got Deployment (apps/v1)"),
    ([_role("Role", [{"verbs": "patch"}])], ":5:1: rules[0].verbs: expected a list of strings"),
    ([_role("Role", {"verbs": ["patch"]})], ":5:1: rules: expected a list of rules"),
    ([], ":0:0: no Role or ClusterRole: give the roles the user holds (a Role with `rules: []` "
         "states that they hold none)"),
], ids=["not-a-role", "verbs-not-a-list", "rules-not-a-list", "empty"])
def test_user_roles_that_are_not_roles_exit_two_naming_file_line_and_field(
        out_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        documents: list[Any], problem: str) -> None:
    objects = write(tmp_path / "objects.yaml", GOOD)
    roles = tmp_path / "roles.yaml"
    roles.write_text(yaml.safe_dump_all(documents, sort_keys=False) if documents else "")
    code, _, err = run(capsys, "check", "--policies", str(out_dir), "--user-roles", str(roles),
                       str(objects))
    assert code == 2
    assert err == f"{roles}{problem}\n1 error; nothing was checked\n"
