"""What a compiled output's policies say of objects already stored: the audit, offline.

Admission judges a write, never what is stored, so a tightened TenantPolicy (a lower limit, a
consumer or node removed, a namespace dropped) leaves objects behind that it would not admit
today. The audit decides each stored object as `fivespot check` decides a CREATE of it — the
policies as they stand, with the server's own whole Status — after removing what only the API
server sets (status, resourceVersion, uid, generation, timestamps, managedFields). An UPDATE of
an object to itself would tell nothing: the policies ratchet, and admit an update that leaves an
object no worse than before (`fivespot.policies.admission`).

Objects come from a cluster (`fivespot.audit` lists them) or from files exported with
`kubectl get ... -o yaml` (a List, or several documents), so a CI job without cluster access can
audit a branch's output against a nightly export.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from fivespot.commandline.yamlbounds import MAX_FILE_BYTES
from fivespot.compiler.check.objectyaml import parse_documents, read_file
from fivespot.compiler.check.objects import Result, check, input_files
from fivespot.compiler.check.render import assumed_note, pretty_json, table

SERVER_SET: Final = ("resourceVersion", "uid", "generation", "creationTimestamp",
                     "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink")
"""What the API server writes into metadata, and a create must not carry."""


def as_created(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object as a create of it today would send it: no status, no server-set metadata."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in SERVER_SET}
    return {k: (meta if k == "metadata" else v) for k, v in obj.items() if k != "status"}


def stored_objects(files: Sequence[Path]) -> list[dict[str, Any]]:
    """The objects of `kubectl get -o yaml|json` exports (Lists expanded), as stored."""
    found: list[dict[str, Any]] = []
    for path in input_files(list(files)):
        for document in parse_documents(read_file(path, str(path)), str(path)):
            data = document.data
            items = data.get("items") if isinstance(data, dict) and data.get("kind", "").endswith(
                "List") else None
            for item in items if isinstance(items, list) else [data]:
                if isinstance(item, dict):
                    found.append(item)
    return found


def audit(policies: Sequence[Path], stored: Sequence[Mapping[str, Any]], *,
          jobs: int | None = None) -> list[Result]:
    """The verdict for each stored object, as a create of it today (skipped: no policy of the
    output covers its kind)."""
    with tempfile.TemporaryDirectory(prefix="fivespot-audit-") as folder:
        streams = []
        for number, chunk in enumerate(_chunks([
                (json.dumps(as_created(o), separators=(",", ":")) + "\n").encode()
                for o in stored])):
            streams.append(Path(folder) / f"stored-{number}.json")
            streams[-1].write_bytes(chunk)
        return check(list(policies), streams, jobs=jobs)


def _chunks(lines: Sequence[bytes]) -> list[bytes]:
    """The lines joined into as few files as `check` reads (each within its size limit: a
    large cluster's objects are more than one file holds), at least one."""
    chunks: list[bytes] = []
    current: list[bytes] = []
    size = 0
    for line in lines:
        if current and size + len(line) > MAX_FILE_BYTES:
            chunks.append(b"".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line)
    return [*chunks, b"".join(current)]


def denied(results: Sequence[Result]) -> list[Result]:
    return [r for r in results if not r.skipped and not r.verdict.allowed]


def summary(results: Sequence[Result]) -> str:
    decided = [r for r in results if not r.skipped]
    out = denied(results)
    return (f"{len(results)} stored object{'s' if len(results) != 1 else ''}: "
            f"{len(decided) - len(out)} within policy, {len(out)} the policies would deny, "
            f"{len(results) - len(decided)} no policy covers")


def render_table(results: Sequence[Result]) -> str:
    """One row per violation of each object the policies would deny, then the summary."""
    rows = [["OBJECT", "SOURCE", "POLICY", "FIELD", "MESSAGE"]]
    for result in denied(results):
        for violation in result.verdict.violations:
            rows.append([result.label, violation.source, violation.policy or "",
                         violation.field or "-", violation.message])
    lines = [table(rows)] if len(rows) > 1 else []
    return "\n".join([*lines, summary(results), *assumed_note(
        [r.verdict for r in results], "stored object", STORED_HINT)])


STORED_HINT: Final = ("a stored object does not say who wrote it; the API server asked the "
                      "writer's RBAC when it was written")


def render_json(results: Sequence[Result]) -> str:
    out = denied(results)
    return pretty_json({"denied": [r.as_json() for r in out], "summary": {
        "stored": len(results), "denied": len(out),
        "notCovered": sum(1 for r in results if r.skipped)}})
