"""The PolicyReport of one namespace's ScheduledCapacities, as a pure function of what the
policies in force now say of each (`fivespot.controllers.inforce`).

The wg-policy API (`wgpolicyk8s.io/v1alpha2`, read by Policy Reporter and other tools): one
`PolicyReport` per namespace, named `fivespot-scheduledcapacities`, with one `fail` result per
violation of an object the policies would deny today (the policy, the field as the rule, the
message `fivespot check` gives) and one `pass` result per object within them, so the summary
counts every object. The timestamp of a result is when its object was judged so; it moves only
when the verdict does, so an unchanged namespace writes an unchanged report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from fivespot.controllers.inforce import OutOfPolicy, PolicyObservation

API_VERSION: Final = "wgpolicyk8s.io/v1alpha2"
GROUP: Final = "wgpolicyk8s.io"
VERSION: Final = "v1alpha2"
KIND: Final = "PolicyReport"
PLURAL: Final = "policyreports"
NAME: Final = "fivespot-scheduledcapacities"
SOURCE: Final = "fivespot"
WITHIN: Final = "fivespot-policies-in-force"
"""The policy a `pass` result names: every admission policy in force admits the object."""
LABELS: Final = {"app.kubernetes.io/managed-by": "fivespot", "app.kubernetes.io/part-of": "fivespot"}


def _resource(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "name": meta.get("name"), "namespace": meta.get("namespace"), "uid": meta.get("uid")}


def _timestamp(seconds: int) -> dict[str, int]:
    return {"seconds": seconds, "nanos": 0}


def results(judged: Iterable[tuple[Mapping[str, Any], PolicyObservation]], now: int,
            before: Mapping[tuple[str, str, str], int]) -> list[dict[str, Any]]:
    """The report's results, sorted by object then policy; `before` keeps each (uid, policy,
    result) result's earlier timestamp, so only a changed verdict gets `now`."""
    found = []
    for obj, observation in judged:
        resource = _resource(obj)
        if isinstance(observation, OutOfPolicy):
            entries = [(v.policy or SOURCE, v.field or v.policy or "", "fail", v.message)
                       for v in observation.violations]
        else:
            entries = [(WITHIN, "", "pass", "the admission policies in force now admit this object")]
        for policy, rule, result, message in entries:
            key = (str(resource["uid"]), policy, result)
            found.append({
                "source": SOURCE, "policy": policy, "rule": rule or policy, "result": result,
                "message": message, "scored": True,
                "severity": "high" if result == "fail" else "info",
                "category": "TenantPolicy", "resources": [resource],
                "timestamp": _timestamp(before.get(key, now)),
            })
    return sorted(found, key=lambda r: (str(r["resources"][0]["name"]), r["policy"], r["result"]))


def timestamps(report: Mapping[str, Any] | None) -> dict[tuple[str, str, str], int]:
    """(uid, policy, result) -> seconds, of a report as stored."""
    found: dict[tuple[str, str, str], int] = {}
    for result in (report or {}).get("results") or []:
        for resource in result.get("resources") or []:
            stamp = (result.get("timestamp") or {}).get("seconds")
            if isinstance(stamp, int):
                found[(str(resource.get("uid")), str(result.get("policy")),
                       str(result.get("result")))] = stamp
    return found


def report(namespace: str, listed: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole PolicyReport object for `namespace` with these results."""
    failed = {str(r["resources"][0]["uid"]) for r in listed if r["result"] == "fail"}
    passed = {str(r["resources"][0]["uid"]) for r in listed if r["result"] == "pass"}
    return {
        "apiVersion": API_VERSION, "kind": KIND,
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(LABELS)},
        "results": listed,
        "summary": {"pass": len(passed), "fail": len(failed), "warn": 0, "error": 0, "skip": 0},
    }


def failing(report_body: Mapping[str, Any]) -> int:
    """How many objects the report says the policies would deny."""
    return int((report_body.get("summary") or {}).get("fail") or 0)
