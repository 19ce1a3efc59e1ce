"""What `fivespot check` prints, tables or JSON, and the pieces `test` and `audit` print with.

Tables are left-aligned columns, then for `check` the API server's whole message of each denied
object (as kubectl prints it); JSON is written by msgspec's C encoder, byte for byte what
`json.dumps(indent=2)` writes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

import msgspec.json

from fivespot.compiler.check.objects import Result
from fivespot.policies.admission_eval import Verdict


def table(rows: list[list[str]]) -> str:
    """Left-aligned columns two spaces apart, the last one unpadded, each line right-trimmed."""
    if not rows:
        return ""
    widths = [max(map(len, column)) for column in list(zip(*rows))[:-1]]
    line = "  ".join([*(f"{{:<{width}}}" for width in widths), "{}"]).format
    return "\n".join([line(*row).rstrip() for row in rows])


def render_check_table(results: Sequence[Result]) -> str:
    """One row per violation or warning (one for an allowed object), then, for each denied
    object, the API server's whole message, as kubectl prints it after `error when creating`."""
    rows = [["INPUT", "OBJECT", "OPERATION", "VERDICT", "SOURCE", "POLICY", "FIELD", "MESSAGE"]]
    errors = []
    for result in results:
        verdict = result.verdict
        where = f"{result.file}:{result.line}"
        if result.skipped:
            rows.append([where, result.label, result.operation, "skipped", "", "", "",
                         result.skipped])
        elif verdict.allowed:
            rows.append([where, result.label, result.operation, "allowed", "", "", "", ""])
        for violation in verdict.violations:
            rows.append([where, result.label, result.operation, "denied", violation.source,
                         violation.policy, violation.field or "-", violation.message])
        for warning in verdict.warnings:
            rows.append([where, result.label, result.operation, "warning", "", "", "", warning])
        if verdict.status is not None:
            errors.append(f"{where}: Error from server ({verdict.status.reason}): "
                          f"{verdict.status.message}")
    denied = sum(1 for r in results if not r.verdict.allowed)
    skipped = sum(1 for r in results if r.skipped)
    summary = f"{len(results)} object{'s' if len(results) != 1 else ''}: " \
              f"{len(results) - denied - skipped} allowed, {denied} denied" \
              + (f", {skipped} skipped" if skipped else "")
    return "\n".join([table(rows), *(["", *errors, ""] if errors else []), summary,
                      *assumed_note([r.verdict for r in results], "object", USER_ROLES_HINT)])


USER_ROLES_HINT: Final = "state the user's roles with --user-roles ROLES.yaml"


def assumed_note(verdicts: Sequence[Verdict], what: str, hint: str) -> list[str]:
    """One line saying how many `what`s were decided assuming the user's RBAC allows what a
    policy asks the authorizer, and how to state it instead (nothing when none was)."""
    counted = sum(1 for v in verdicts if v.assumed)
    if not counted:
        return []
    policies = ", ".join(sorted({p for v in verdicts for p in v.assumed}))
    return [f"assumed: {counted} {what}{' was' if counted == 1 else 's were'} decided as if the "
            f"user's RBAC allowed what {policies} asks the authorizer (nothing offline knows it; "
            f"the API server asks for real): {hint}"]


def pretty_json(value: Any) -> str:
    """`json.dumps(value, indent=2, ensure_ascii=False)`, byte for byte, written by msgspec's C
    encoder: the standard library's `indent` path is pure Python (0.15 s of a 10,000-object run's
    0.6 s, all of it in the parent after the workers are done). The two write every JSON value
    alike but a float (`1e+20` / `1e20`), which no result holds; a text that is not Unicode (a
    file name's undecodable bytes, kept as surrogates) is left to `json`, which writes it."""
    try:
        return msgspec.json.format(msgspec.json.encode(value), indent=2).decode()
    except UnicodeEncodeError:
        return json.dumps(value, indent=2, ensure_ascii=False)


def render_check_json(results: Sequence[Result]) -> str:
    return pretty_json({"results": [r.as_json() for r in results]})
