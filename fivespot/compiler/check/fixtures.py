"""`fivespot test` (and `run-example`'s fixtures): a config repo's Fixtures run on the checker.

`test` compiles a config repo in memory and runs its Fixtures, comparing each verdict with the one
the fixture expects, like `gator verify` or `kyverno test`. The checker is `fivespot check`'s
(`fivespot.compiler.check.objects`), built from the compiled objects instead of files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from msgspec import Struct

from fivespot.compiler.check.objects import checker_from_objects, envelope_problems
from fivespot.compiler.check.render import assumed_note, pretty_json, table
from fivespot.compiler.diagnostics import Diagnostic, InputError, Location
from fivespot.compiler.pipeline import Compiled, compile_repo
from fivespot.compiler.spec import PolicyRule
from fivespot.policies.admission_eval import NamespaceRequired, Request, UnknownKind, Verdict, Violation
from fivespot.policies.cel import authz
from fivespot.policies.kubeversions import KubernetesVersion


class FixtureResult(Struct, frozen=True):
    name: str
    operation: str
    expect: Mapping[str, Any]
    """What the fixture gives (a list it leaves out is not checked, and not shown)."""
    verdict: Verdict
    problems: tuple[str, ...]
    where: Location = Location("", 0, 0)
    """Where the fixture is defined."""

    @property
    def passed(self) -> bool:
        return not self.problems

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name,
                "source": {"file": self.where.file, "line": self.where.line},
                "operation": self.operation, "passed": self.passed,
                "expected": dict(self.expect), "result": self.verdict.as_json(),
                "problems": list(self.problems)}


def run_fixtures(config_dir: Path, server: KubernetesVersion | None = None) -> list[FixtureResult]:
    """Compile `config_dir` in memory and run its Fixtures (as `run_compiled_fixtures`); raises
    CompileError / InputError."""
    return run_compiled_fixtures(compile_repo(config_dir), config_dir, server)


def run_compiled_fixtures(compiled: Compiled, config_dir: Path,
                          server: KubernetesVersion | None = None) -> list[FixtureResult]:
    """Run the Fixtures of an already compiled repo as the API server of version `server`
    (default: the newest the Platform targets); raises InputError."""
    server = server or compiled.repo.platform.spec.kubernetes_versions()[-1]
    checker = checker_from_objects([a.obj for a in compiled.artifacts], str(config_dir),
                                   server=server)
    results = []
    problems = []
    for fixture in compiled.repo.fixtures:
        name = fixture.metadata.name
        where = compiled.repo.sources.get(("Fixture", name), Location(str(config_dir), 0, 0))
        spec = fixture.spec
        malformed = [(f"spec.{side}.{field}", message)
                     for side, obj in (("object", spec.object), ("oldObject", spec.old_object))
                     if obj is not None for field, message in envelope_problems(obj)]
        if malformed:
            problems += [Diagnostic(where, field, message) for field, message in malformed]
            continue
        request = Request(spec.operation, spec.object, spec.old_object,
                          field_validation=spec.field_validation,
                          authorizer=user_rules_authorizer(spec.user_rules, spec.object))
        try:
            verdict = checker.check(request)
        except UnknownKind as error:
            problems.append(Diagnostic(where, "spec.object.kind",
                                       f"{error.kind} ({error.api_version}) is not a kind the "
                                       f"compiled policies know (known: {', '.join(error.known)})"))
            continue
        except NamespaceRequired as error:
            problems.append(Diagnostic(where, "spec.object.metadata.namespace",
                                       f"namespace {error.namespace!r}: {error.needed_by} selects "
                                       "namespaces by labels a fixture cannot give"))
            continue
        expect = spec.expect.model_dump(by_alias=True, exclude_none=True, exclude_unset=True)
        results.append(FixtureResult(name, spec.operation, expect, verdict,
                                     tuple(compare(expect, verdict)), where))
    if problems:
        raise InputError(problems)
    return results


def user_rules_authorizer(rules: Sequence[PolicyRule] | None, obj: Mapping[str, Any]
                          ) -> dict[str, Any]:
    """The authorizer of a fixture's user: its `userRules`, in the object's namespace, else
    every check assumed allowed."""
    if rules is None:
        return authz.assumed()
    namespace = str((obj.get("metadata") or {}).get("namespace") or "default")
    return authz.stated((authz.Rule(tuple(r.verbs), tuple(r.api_groups), tuple(r.resources),
                                    tuple(r.resource_names), namespace=namespace)
                         for r in rules), "the fixture's userRules")


def compare(expect: Mapping[str, Any], verdict: Verdict) -> list[str]:
    """Why `verdict` is not what `expect` says (empty when it is).

    `allowed` must be equal, and so must `message` (the server's whole message) when given. A
    `violations` list, when given, must match the actual violations
    one to one (each entry's policy and field equal, its message contained); likewise a
    `warnings` list (each text contained in a distinct warning). An omitted list is not checked.
    """
    problems = []
    if bool(expect.get("allowed")) != verdict.allowed:
        got = "allowed" if verdict.allowed else "denied"
        want = "allowed" if expect.get("allowed") else "denied"
        problems.append(f"expected {want}, got {got}")
    if "message" in expect:
        got_message = verdict.status.message if verdict.status is not None else None
        if got_message != expect["message"]:
            problems.append(f"expected the message {expect['message']!r}, got {got_message!r}")
    wanted = list(expect.get("violations") or [])
    if wanted:
        pairs = _pair(wanted, list(verdict.violations), _violation_matches)
        for index, entry in enumerate(wanted):
            if index not in pairs:
                problems.append(f"expected violation {_describe(entry)} not found")
        matched = set(pairs.values())
        for index, actual in enumerate(verdict.violations):
            if index not in matched:
                problems.append(f"unexpected violation {_describe(actual.as_json())}")
    wanted_warnings = list(expect.get("warnings") or [])
    if wanted_warnings:
        pairs = _pair(wanted_warnings, list(verdict.warnings), lambda w, a: w in a)
        for index, text in enumerate(wanted_warnings):
            if index not in pairs:
                problems.append(f"expected warning containing {text!r} not found")
        matched = set(pairs.values())
        for index, text in enumerate(verdict.warnings):
            if index not in matched:
                problems.append(f"unexpected warning {text!r}")
    return problems


def _violation_matches(entry: Mapping[str, Any], actual: Violation) -> bool:
    if "policy" in entry and entry["policy"] != actual.policy:
        return False
    if "field" in entry and entry["field"] != actual.field:
        return False
    return "message" not in entry or str(entry["message"]) in actual.message


def _pair(wanted: list[Any], actual: list[Any], fits: Any) -> dict[int, int]:
    """A maximum one-to-one matching wanted index -> actual index (augmenting paths)."""
    owner: dict[int, int] = {}

    def place(i: int, seen: set[int]) -> bool:
        for j, candidate in enumerate(actual):
            if j in seen or not fits(wanted[i], candidate):
                continue
            seen.add(j)
            if j not in owner or place(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(wanted)):
        place(i, set())
    return {i: j for j, i in owner.items()}


def _describe(entry: Mapping[str, Any]) -> str:
    shown = {k: entry[k] for k in ("source", "policy", "field", "message") if entry.get(k) is not None}
    return json.dumps(shown, ensure_ascii=False)


USER_RULES_HINT: Final = "state the user's rules with a fixture's spec.userRules"


def render_test_table(results: Sequence[FixtureResult]) -> str:
    rows = [["RESULT", "FIXTURE", "OPERATION", "EXPECTED", "GOT", "BY"]]
    for result in results:
        expected = "allowed" if result.expect.get("allowed") else "denied"
        got = "allowed" if result.verdict.allowed else "denied"
        by = ", ".join(sorted({f"{v.policy}:{v.field or '-'}" for v in result.verdict.violations}))
        rows.append(["PASS" if result.passed else "FAIL", result.name, result.operation,
                     expected, got, by])
    lines = [table(rows)]
    for result in results:
        if result.problems:
            lines.append(f"FAIL {result.name} ({result.where}):")
            lines += [f"  - {problem}" for problem in result.problems]
            for violation in result.verdict.violations:
                lines.append(f"    got [{violation.source}] {violation.policy} "
                             f"{violation.field or '-'}: {violation.message}")
    failed = sum(1 for r in results if not r.passed)
    lines.append(f"{len(results)} fixtures: {len(results) - failed} passed, {failed} failed")
    lines += assumed_note([r.verdict for r in results], "fixture", USER_RULES_HINT)
    return "\n".join(lines)


def render_test_json(results: Sequence[FixtureResult]) -> str:
    failed = sum(1 for r in results if not r.passed)
    return pretty_json({"fixtures": [r.as_json() for r in results],
                        "passed": len(results) - failed, "failed": failed})
