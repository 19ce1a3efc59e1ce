"""The offline checker says exactly what the real API server says, on a corpus of 300+ cases.

The compiled agent-sandbox example (its CRDs, the consumer's CRD, the policies, bindings and
params) is applied to a real kube-apiserver; then every case (the example's fixtures, generated
field paths, values at every boundary, unknown and duplicate fields, wrong types, non-ASCII
values, and UPDATE pairs) goes through both `fivespot check`'s evaluator and a server-side
dry-run create or update with `fieldValidation=Strict`, as kubectl sends it. The whole Status must
be identical, byte for byte: code, reason, message and every cause (field, reason, message) in
order. The corpus is generated deterministically (fixed seeds), so a failure names a case that
can be replayed.

A case may state the requesting user's RBAC (a fixture's `userRules`): the server then hears it
from a ServiceAccount holding a Role of exactly those rules (and the right to create and update
ScheduledCapacities), impersonated, so its authorizer decides the author-rights policy on real
RBAC; offline, the same rules decide. Every other case is sent by the admin, whom every
authorizer check allows, as the offline checker assumes when no rights are stated.

One thing is not reproducible: when several ValidatingAdmissionPolicies deny, the server names
the first of its policy cache, whose order is a Go map's (it changes when the cache is rebuilt).
There the server's message must be the one fivespot gives for one of the policies it finds
denying; fivespot names the first by binding name, and lists them all.
"""

from __future__ import annotations

import copy
import functools
import json
import random
import re
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from kubernetes import client, dynamic
from kubernetes.client.rest import ApiException

from fivespot.compiler.check.fixtures import user_rules_authorizer
from fivespot.compiler.pipeline import compile_repo
from fivespot.compiler.check.objectyaml import parse_documents
from fivespot.compiler.spec import PolicyRule
from fivespot.policies import kubeversions
from fivespot.policies.admission_eval import Checker, Request, Verdict, status
from tests.integration.authorizer import wait_in_force
from tests.integration.test_control_plane_is_real import eventually

ROOT: Final = Path(__file__).resolve().parents[2]
EXAMPLE: Final = ROOT / "examples" / "agent-sandbox"
GROUP: Final = "5spot.finos.org"
VERSION: Final = "v1alpha1"
PLURAL: Final = "scheduledcapacities"
TENANT: Final = "agents"
OUTSIDER: Final = "team-b"
SEED: Final = 5_000_000_005
MANAGER: Final = "fivespot-fidelity"

BASE: Final[dict[str, Any]] = {
    "apiVersion": f"{GROUP}/{VERSION}", "kind": "ScheduledCapacity",
    "metadata": {"name": "warm-pool", "namespace": TENANT},
    "spec": {
        "schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                     "kind": "TimeBasedSpotSchedule", "name": "business-hours"},
        "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                      "kind": "VirtualMachinePool", "name": "sandboxes"},
        "capacity": {"path": "spec.warmReplicas", "activeValue": 8},
        "handback": {"drainedPath": "status.inUse", "timeout": "15m"},
    },
}


@dataclass(frozen=True)
class Case:
    name: str
    object: dict[str, Any]
    old: dict[str, Any] | None = None
    raw: str | None = None
    """The request body as sent, when a decoded object cannot carry it (a duplicate field)."""
    user_rules: tuple[PolicyRule, ...] | None = None
    """The requesting user's RBAC in the object's namespace (None: the admin sends it)."""

    @property
    def operation(self) -> str:
        return "UPDATE" if self.old is not None else "CREATE"


# --- the corpus ---------------------------------------------------------------------------------


def _with(path: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """BASE (or `base`) with the dotted `path` set to `value` (`...` deletes it)."""
    obj = copy.deepcopy(base or BASE)
    parts = path.split(".")
    cursor = obj
    for part in parts[:-1]:
        cursor = cursor.setdefault(part, {})
    if value is ...:
        cursor.pop(parts[-1], None)
    else:
        cursor[parts[-1]] = value
    return obj


def _draw(strategy: st.SearchStrategy[Any], count: int) -> list[Any]:
    """`count` distinct examples of `strategy`, the same ones on every run (derandomized)."""
    drawn: list[Any] = []

    @settings(max_examples=count * 3, derandomize=True, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value: Any) -> None:
        if value not in drawn and len(drawn) < count:
            drawn.append(value)

    collect()
    return drawn


_SEGMENT_CHARS: Final = string.ascii_letters + string.digits + "[]*'/\"-_ "


def _paths(prefixes: tuple[str, ...]) -> st.SearchStrategy[str]:
    segment = st.one_of(
        st.from_regex(r"\A[a-z][a-zA-Z0-9]{0,8}\Z"),
        st.text(alphabet=_SEGMENT_CHARS, min_size=0, max_size=6),
        st.sampled_from(["0", "[0]", "*", "..", "x\n", "É", "a/b"]),
    )
    return st.builds(
        lambda head, tail: ".".join([head, *tail]),
        st.sampled_from(prefixes), st.lists(segment, min_size=0, max_size=9))


def fixture_cases() -> list[Case]:
    compiled = compile_repo(EXAMPLE / "config")
    return [Case(f"fixture:{f.metadata.name}", copy.deepcopy(f.spec.object),
                 copy.deepcopy(f.spec.old_object) if f.spec.operation == "UPDATE" else None,
                 user_rules=None if f.spec.user_rules is None else tuple(f.spec.user_rules))
            for f in compiled.repo.fixtures]


def generated_cases() -> list[Case]:
    rng = random.Random(SEED)
    cases: list[Case] = []

    def add(name: str, obj: dict[str, Any], old: dict[str, Any] | None = None,
            raw: str | None = None) -> None:
        cases.append(Case(name, obj, old, raw))

    for i, path in enumerate(_draw(_paths(("spec", "status", "metadata", "Spec", "")), 70)):
        add(f"capacity-path-{i}:{path!r}", _with("spec.capacity.path", path))
    for i, path in enumerate(_draw(_paths(("status", "spec", "")), 25)):
        add(f"drained-path-{i}:{path!r}", _with("spec.handback.drainedPath", path))
    segments = ["spec"] + [f"s{k}" for k in range(1, 10)]
    for count in range(1, 10):  # segment-count boundary: spec + 7 allowed, + 8 not
        add(f"capacity-path-segments-{count}", _with("spec.capacity.path", ".".join(segments[:count + 1])))
    for value in (-1, 0, 1, 9, 10, 11, 31, 32, 33, 2147483647, 2147483648, "8", 1.5, True, None):
        add(f"active-value:{value!r}", _with("spec.capacity.activeValue", value))
    for timeout in ("1s", "999ms", "1000ms", "0.5s", "1.0s", "168h", "168h0m1s", "10080m",
                    "604800s", "604801s", "1h30m", "7d", "", "0s", "-1s", "15m ", "1.5h", "2h45m30s"):
        add(f"timeout:{timeout!r}", _with("spec.handback.timeout", timeout))
    for api_version in ("spotschedules.5spot.finos.org/v1", "spotschedules.5spot.finos.org/v2beta3",
                        "spotschedules.5spot.finos.org/v1alpha", "spotschedules.5spot.finos.org",
                        "spotschedules.5spot.finos.org/v1\n", "5spot.finos.org/v1alpha1",
                        "other.spotschedules.5spot.finos.org/v1", "v1", ""):
        add(f"schedule-api-version:{api_version!r}", _with("spec.schedule.apiVersion", api_version))
    for kind in ("ManualSchedule", "CapitalMarketsSchedule", "CronSchedule", "manualSchedule",
                 "Manual Schedule", "M"):
        add(f"schedule-kind:{kind!r}", _with("spec.schedule.kind", kind))
    for api_version, kind in (("pools.agents.example.com/v1", "VirtualMachinePool"),
                              ("pools.agents.example.com/v1alpha1", "VirtualMachine"),
                              ("apps/v1", "Deployment"), ("v1", "VirtualMachinePool"),
                              ("Pools.example.com/v1", "VirtualMachinePool"),
                              ("pools.agents.example.com/", "VirtualMachinePool")):
        add(f"target:{api_version}:{kind}", _with("spec.targetRef",
                                                  {"apiVersion": api_version, "kind": kind, "name": "t"}))
    for node in ("node-a", "node-a.example.com", "Node-A", "-node", "a" * 253, "a" * 254, ""):
        add(f"node-name:{node[:20]!r}:{len(node)}", _with("spec.nodeName", node))
    for namespace in (TENANT, OUTSIDER, "default"):
        add(f"namespace:{namespace}", _with("metadata.namespace", namespace))
        add(f"namespace-bad-kind:{namespace}",
            _with("spec.schedule.kind", "CronSchedule", _with("metadata.namespace", namespace)))
    for name in ("pool", "pool.example", "Pool", "pool_1", "a" * 253, "a" * 254):
        add(f"metadata-name:{name[:20]}:{len(name)}", _with("metadata.name", name))
    for field, shape in (("spec.extra", 1), ("spec.capacity.unit", "x"), ("spec.enabled", "true"),
                         ("spec.killSwitch", 0), ("spec.handback", {"drainedPath": "status.inUse"}),
                         ("spec.handback", ...), ("spec.schedule", "ManualSchedule"),
                         ("spec.targetRef.name", ...), ("spec", ...), ("spec.enabled", None),
                         ("spec.nodeName", None), ("status", {"phase": "Bogus"})):
        add(f"shape:{field}={shape!r}", _with(field, shape))
    for where, text in (("spec.nodeName", "n\u0153ud"), ("spec.nodeName", "node-\U0001F600"),
                         ("spec.capacity.path", "spec.\u00e9t\u00e9"), ("spec.handback.timeout", "15m\u00a0"),
                         ("spec.handback.timeout", "\u0661\u0665m"), ("spec.schedule.kind", "Manual\x01"),
                         ("spec.handback.drainedPath", "status.in\tUse"), ("metadata.name", "p\u00f6\u00f6l"),
                         ("spec.targetRef.name", "<sandboxes>&\u2028"), ("spec.schedule.name", "\u00e9" * 300)):
        add(f"non-ascii:{where}={text[:12]!r}", _with(where, text))
    for where, wrong in (("spec.capacity", []), ("spec.handback.timeout", 15), ("spec.nodeName", 1.5),
                         ("spec.capacity.activeValue", 1e20), ("spec.capacity.activeValue", -0.5),
                         ("spec.targetRef", "VirtualMachinePool"), ("spec.enabled", "yes"),
                         ("spec.capacity.activeValue", 2**53 + 1), ("status", [1, 2])):
        add(f"wrong-type:{where}={wrong!r}", _with(where, wrong))
    for where, extra in (("spec.capacity.unit", "pods"), ("status.x", 1), ("metadata.extra", "e"),
                         ("spec.schedule.namespace", "x"), ("spec.zzz", {"a": 1})):
        add(f"unknown:{where}", _with(where, extra))
    body = json.dumps(BASE)
    for name, raw in (
            ("spec.enabled", body[:-2] + ', "enabled": true, "enabled": false}}'),
            ("spec.capacity.activeValue", body.replace('"activeValue": 8', '"activeValue": 8, "activeValue": 11')),
            ("with-unknown", body[:-2] + ', "extra": 1, "enabled": true, "enabled": false}}'),
            ("metadata.name", body.replace('"name": "warm-pool"', '"name": "warm-pool", "name": "other"'))):
        add(f"duplicate:{name}", json.loads(raw), raw=raw)
    for i in range(20):  # random combinations of two boundary mutations
        first = rng.choice(cases[-60:])
        second = rng.choice(cases[:-60])
        merged = copy.deepcopy(first.object)
        merged["spec"] = {**second.object.get("spec", {}), **merged.get("spec", {})}
        add(f"combined-{i}:{first.name}+{second.name}", merged)
    updates = [c for c in cases if not c.name.startswith(("combined", "duplicate", "non-ascii:metadata"))
               and _namespace(c.object) == TENANT and not c.name.startswith("metadata-name")]
    for i, case in enumerate(rng.sample(updates, 45)):
        add(f"update-{i}:{case.name}", copy.deepcopy(case.object), copy.deepcopy(BASE))
    for field, value in (("spec.capacity.activeValue", 10), ("spec.enabled", False),
                         ("spec.capacity.activeValue", 11), ("spec.killSwitch", True)):
        add(f"update-base:{field}={value!r}", _with(field, value), copy.deepcopy(BASE))
    # metadata the server validates before the schema (apimachinery's ObjectMeta checks); one bad
    # entry each, since the server walks these maps in no fixed order
    for where, entry in (
            ("metadata.labels", {"bad key!": "x"}), ("metadata.labels", {"team": "bad value!"}),
            ("metadata.labels", {"a/b/c": "x"}), ("metadata.labels", {"/x": "y"}),
            ("metadata.labels", {"Example.com/x": "y"}), ("metadata.labels", {"x": "v" * 64}),
            ("metadata.labels", {"k" * 64: "v"}), ("metadata.labels", {"x": "", "y.z/w_1": "a.b-c"}),
            ("metadata.labels", {"example.com/x": "zo\u00eb"}), ("metadata.labels", {"": "v"}),
            ("metadata.labels", {("p" * 254) + "/x": "v"}),
            ("metadata.annotations", {"Bad Key": "y"}),
            ("metadata.annotations", {"Example.COM/Upper": "fine: \U0001F600"}),
            ("metadata.annotations", {"big": "x" * 262144}),
            ("metadata.annotations", {"big": "x" * (262144 - 3)}),
            ("metadata.finalizers", ["example.com/cleanup"]), ("metadata.finalizers", ["bad finalizer!"]),
            ("metadata.finalizers", ["orphan", "foregroundDeletion"]), ("metadata.finalizers", ["a/b/c"])):
        add(f"metadata:{where}={str(entry)[:40]!r}", _with(where, entry))
    add("metadata+schema:bad-label-and-bad-value",
        _with("metadata.labels", {"bad key!": "x"}, _with("spec.capacity.activeValue", "8")))
    for where, entry in (("metadata.labels", {"bad key!": "x"}), ("metadata.annotations", {"Bad Key": "y"}),
                         ("metadata.finalizers", ["bad finalizer!"])):
        add(f"update-metadata:{where}", _with(where, entry), copy.deepcopy(BASE))
    return cases


GAUGES: Final = ROOT / "tests" / "integration" / "testdata" / "kubeversions" / "gauges.yaml"
GAUGE_BASE: Final[dict[str, Any]] = {
    "apiVersion": "fidelity.fivespot.example/v1", "kind": "Gauge",
    "metadata": {"name": "gauge", "namespace": TENANT},
    "spec": {"replicas": 3, "label": "ok", "limits": {"cpu": 1}},
}
INT32_MAX: Final = 2**31 - 1
FLOAT32_MAX: Final = 3.4028234663852886e38


def _gauge(field: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    obj = copy.deepcopy(base or GAUGE_BASE)
    obj["spec"][field] = value
    return obj


def version_cases() -> list[Case]:
    """Where the supported API servers differ (fivespot/policies/kubeversions.py): numbers outside their
    format's range (refused from 1.36 on), and CEL rule failures on a scalar and an object (1.34
    shows the schema type as the value). Every case runs against every version's server."""
    cases = [Case(f"versions:{field}={value!r}", _gauge(field, value)) for field, value in (
        ("replicas", INT32_MAX), ("replicas", INT32_MAX + 1), ("replicas", -INT32_MAX - 1),
        ("replicas", -INT32_MAX - 2), ("replicas", 2**53), ("replicas", 1e10),
        ("bounded", 100), ("bounded", 101), ("bounded", INT32_MAX + 1), ("bounded", -(2**40)),
        ("total", 2**63 - 1), ("total", -(2**63)), ("plain", INT32_MAX + 1),
        ("ratio", 3.4e38), ("ratio", 3.5e38), ("ratio", -1e39), ("ratio", 1.5), ("ratio", 2**40),
        ("exact", 1e308), ("loose", 1e300), ("counts", [1, INT32_MAX + 1, 2, -(2**33)]),
        ("limits", {"cpu": INT32_MAX + 1}), ("limits", {"cpu": 0}), ("label", "forbidden"),
        ("label", "x" * 21), ("replicas", "3"),
        ("template", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ok"}}),
        ("template", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name"}}),
        ("template", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a" * 254}}),
        ("template", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "x-"}}),
        # (an embedded resource's labels, annotations and namespace, and a missing apiVersion, are
        # not checked as the server checks them, on any version: not in the corpus until they are)
        # kube-openapi's formats: strfmt.IsDateTime and IsDate as written, and its type validator,
        # which names the format (and the Go format of the value) and lets a list through
        ("since", "2026-03-02T22:00:00Z"), ("since", "2026-03-02 22:00:00Z"),
        ("since", "2026-03-02t22:00:00z"), ("since", "2026-03-02T22:00:00+0100"),
        ("since", "2026-03-02T22:00:00x5Z"), ("since", "2026-02-29T22:00:00Z"), ("since", 5),
        ("since", 2.5), ("since", True), ("since", ["x"]), ("since", {"at": "x"}),
        ("day", "0000-02-29"), ("day", "2026-02-29"), ("day", 20260302),
        ("replicas", {"a": 1}), ("label", {"a": 1}), ("counts", [{"a": 1}]),
        ("limits", [{"cpu": 1}]),
    )]
    # (two fields out of range at once: the server walks the properties in a Go map's order)
    for field, value in (("replicas", INT32_MAX + 1), ("ratio", 3.5e38), ("label", "forbidden"),
                         ("limits", {"cpu": -1})):
        cases.append(Case(f"versions-update:{field}={value!r}", _gauge(field, value),
                          copy.deepcopy(GAUGE_BASE)))
    return cases


PROVIDERS: Final = "spotschedules.5spot.finos.org/v1alpha1"
PROVIDER_SPECS: Final[dict[str, dict[str, Any]]] = {
    "TimeBasedSpotSchedule": {"daysOfWeek": ["mon-fri"], "hoursOfDay": ["9-17"],
                              "timezone": "Europe/London"},
    "ManualSchedule": {"enabled": False},
    "CapitalMarketsSchedule": {"timezone": "America/New_York",
                               "sessions": [{"days": "mon-fri", "open": "09:30", "close": "16:00"}]},
    "CompositeSchedule": {"not": {"apiVersion": PROVIDERS, "kind": "ManualSchedule", "name": "freeze"}},
}
GOOD_OVERRIDE: Final = {"active": True, "until": "2026-11-24T21:00:00Z"}


def _provider(kind: str, override: Any = ..., name: str = "office-hours") -> dict[str, Any]:
    spec = copy.deepcopy(PROVIDER_SPECS[kind])
    if override is not ...:
        spec["override"] = override
    return {"apiVersion": PROVIDERS, "kind": kind, "metadata": {"name": name, "namespace": TENANT},
            "spec": spec}


def override_cases() -> list[Case]:
    """`spec.override` of every built-in provider kind (issue 38): its shape, `active`'s type,
    and `until` at every edge of the API server's `format: date-time` and the kinds' pattern."""
    cases = [Case(f"override:{kind}", _provider(kind, GOOD_OVERRIDE)) for kind in PROVIDER_SPECS]
    for until in ("2026-11-24T21:00:00Z", "2026-11-24T22:00:00+01:00", "2026-11-24T16:00:00-05:00",
                  "2026-11-24T21:00:00.5Z", "2026-11-24T21:00:00.123456789Z",
                  "2026-11-24T21:00:00.1234567890Z", "2026-11-24 21:00:00Z", "2026-11-24t21:00:00z",
                  "2026-11-24T21:00:00", "2026-11-24T21:00Z", "2026-11-24T21:00:00+0100",
                  "2026-11-24T21:00:00x5Z", "2026-11-24T21:00:00ZT", "2026-02-30T21:00:00Z",
                  "2028-02-29T21:00:00Z", "2026-11-24T24:00:00Z", "2026-11-24T21:60:00Z",
                  "2026-11-24T21:00:00+24:00", "0000-02-29T21:00:00Z", "0999-11-24T21:00:00Z",
                  "tomorrow", "", "2026-11-24", "2026-11-24T21:00:00.000000000000000000000000Z",
                  "2026-11-24T21:00:00Z\n", "2026-11-24T21:00:00\u00a0Z"):
        cases.append(Case(f"override-until:{until!r}",
                          _provider("TimeBasedSpotSchedule", {"active": True, "until": until})))
    for kind in ("ManualSchedule", "CompositeSchedule"):
        for override in ({"active": "true", "until": GOOD_OVERRIDE["until"]},
                         {"active": 1, "until": GOOD_OVERRIDE["until"]},
                         {"active": None, "until": GOOD_OVERRIDE["until"]},
                         {"active": True}, {"until": GOOD_OVERRIDE["until"]}, {},
                         {**GOOD_OVERRIDE, "reason": "incident 42"},
                         {"active": False, "until": 1764018000}, {"active": True, "until": 1.5},
                         {"active": True, "until": True}, {"active": True, "until": []},
                         {"active": True, "until": ["2026-11-24T21:00:00Z"]},
                         {"active": True, "until": {"at": "2026-11-24T21:00:00Z"}},
                         {"active": [True], "until": GOOD_OVERRIDE["until"]},
                         {"active": {"on": True}, "until": GOOD_OVERRIDE["until"]},
                         None, "on", [GOOD_OVERRIDE], []):
            cases.append(Case(f"override-shape:{kind}:{override!r}", _provider(kind, override)))
    for kind in ("CapitalMarketsSchedule", "TimeBasedSpotSchedule"):
        old = _provider(kind)
        cases.append(Case(f"override-update:{kind}:set", _provider(kind, GOOD_OVERRIDE), old))
        cases.append(Case(f"override-update:{kind}:bad-until",
                          _provider(kind, {"active": False, "until": "22:00"}),
                          _provider(kind, GOOD_OVERRIDE)))
        cases.append(Case(f"override-update:{kind}:clear", old, _provider(kind, GOOD_OVERRIDE)))
    return cases


TBSS_BASE: Final[dict[str, Any]] = {
    "apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "TimeBasedSpotSchedule",
    "metadata": {"name": "office-hours", "namespace": TENANT},
    "spec": {"timezone": "Europe/London", "windows": [{"days": "mon-fri", "start": "09:30", "end": "17:00"}]},
}


def schedule_cases() -> list[Case]:
    """TimeBasedSpotSchedule's windows, ranges and closures at their edges: RFC 3339 instants as
    the API server's date-time format and the pattern see them, windows' clocks and lengths,
    holiday codes' shapes, list bounds."""
    cases = []
    # (Two instants the date-time format accepts and the pattern refuses are left out: the API
    # server's CEL binding converts "+24:00" offsets and refuses a lower-case "t", the offline
    # checker's the reverse, so both deny with the pattern's cause but differ in the rules' ones.)
    for instant in ("2026-12-24T08:00:00Z", "2026-12-24T08:00:00+01:00", "2026-12-24T08:00:00.123456789Z",
                    "2026-12-24T08:00:00.1234567891Z", "2026-12-24T08:00:60Z", "2026-12-24T24:00:00Z",
                    "2026-12-24T08:00:00+0100", "2026-12-24 08:00:00Z", "2028-02-29T00:00:00Z",
                    "2026-02-29T00:00:00Z", "2026-12-24T08:00Z", "2026-12-24",
                    "", "2026-12-24T08:00:00-00:00", "9999-12-31T23:59:59Z"):
        cases.append(Case(f"tbss-instant:{instant!r}", _with(
            "spec.closed", {"ranges": [{"start": instant}]}, TBSS_BASE)))
    for start, end in (("2026-12-24T08:00:00Z", "2026-12-24T09:00:00+01:00"),
                       ("2026-12-24T08:00:00Z", "2026-12-24T09:00:00+00:59"),
                       ("2026-12-24T08:00:00.000000001Z", "2026-12-24T08:00:00Z")):
        cases.append(Case(f"tbss-range-order:{start}..{end}", _with(
            "spec.openRanges", [{"start": start, "end": end}], TBSS_BASE)))
    for start, end in (("00:00", "24:00"), ("23:59", "00:00"), ("12:00", "12:00"), ("24:00", "01:00"),
                       ("9:30", "17:00"), ("09:30", "17:60"), ("00:00", "00:00")):
        cases.append(Case(f"tbss-window:{start}-{end}", _with(
            "spec.windows", [{"days": "sat", "start": start, "end": end}], TBSS_BASE)))
    for days in ("mon-fri", "fri-mon", "Mon", "mon,,fri", " sat - sun ", "x" * 97):
        cases.append(Case(f"tbss-window-days:{days[:12]!r}", _with(
            "spec.windows", [{"days": days, "start": "09:00", "end": "10:00"}], TBSS_BASE)))
    for calendar in ({"country": "GB", "subdivision": "ENG"}, {"country": "GBR"}, {"country": "XX"},
                     {"country": "G"}, {"country": "GB", "subdivision": "São Paulo Capital"},
                     {"country": "GB", "subdivision": "a,b"}, {"country": "GB", "subdivision": "x" * 33},
                     {"country": "US", "categories": ["public", "public"]},
                     {"country": "US", "categories": ["a"] * 8}, {"country": "US", "categories": ["a"] * 9},
                     {"country": "US", "categories": ["a", "a", "b", "b", "a"]}, {"country": "US", "extra": 1}):
        cases.append(Case(f"tbss-holidays:{str(calendar)[:40]!r}", _with(
            "spec.closed", {"holidays": [calendar]}, TBSS_BASE)))
    cases.append(Case("tbss-windows-too-many", _with(
        "spec.windows", [{"days": "mon", "start": "09:00", "end": "10:00"}] * 33, TBSS_BASE)))
    cases.append(Case("tbss-dates-duplicate", _with(
        "spec.closed", {"dates": ["2026-12-24", "2026-12-24"]}, TBSS_BASE)))
    cases.append(Case("tbss-update-adds-closures", _with(
        "spec.closed", {"holidays": [{"country": "GB"}], "dates": ["2026-12-24"]}, TBSS_BASE),
        copy.deepcopy(TBSS_BASE)))
    return cases


def corpus() -> list[Case]:
    return (fixture_cases() + generated_cases() + version_cases() + override_cases()
            + schedule_cases())


# --- the cluster side ---------------------------------------------------------------------------


def _documents(path: Path) -> Iterator[dict[str, Any]]:
    for document in yaml.safe_load_all(path.read_text()):
        if isinstance(document, dict):
            yield document


@dataclass
class Cluster:
    objects: client.CustomObjectsApi
    checker: Checker
    namespaces: dict[str, dict[str, Any]]
    admin: client.ApiClient
    authors: dict[tuple[str, str], client.CustomObjectsApi]
    """By (namespace, rules as JSON): a client acting as a ServiceAccount holding those rules."""

    def author(self, case: Case) -> client.CustomObjectsApi | None:
        """Who sends `case`: a ServiceAccount holding its user's rules, or None (the admin)."""
        if case.user_rules is None:
            return None
        namespace = _namespace(case.object)
        rules = [r.model_dump(by_alias=True) for r in case.user_rules]
        key = (namespace, json.dumps(rules, sort_keys=True))
        if key not in self.authors:
            self.authors[key] = _author(self.admin, namespace, f"fidelity-author-{len(self.authors)}",
                                        rules)
        return self.authors[key]


def _author(admin: client.ApiClient, namespace: str, name: str,
            rules: list[dict[str, Any]]) -> client.CustomObjectsApi:
    """A client impersonating ServiceAccount `name`, bound to a Role of `rules` plus the right
    to create and update ScheduledCapacities (what sending a case needs)."""
    rbac = client.RbacAuthorizationV1Api(admin)
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": [*rules, {"apiGroups": [GROUP], "resources": [PLURAL],
                               "verbs": ["create", "update"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": name, "namespace": namespace},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]}
    for create, body in ((rbac.create_namespaced_role, role),
                         (rbac.create_namespaced_role_binding, binding)):
        try:
            create(namespace, body)
        except ApiException as error:
            if error.status != 409:
                raise
    wait_in_force(admin, [role, binding])
    api = client.ApiClient(admin.configuration)
    api.set_default_header("Impersonate-User", f"system:serviceaccount:{namespace}:{name}")
    return client.CustomObjectsApi(api)


def _apply(dyn: dynamic.DynamicClient, obj: dict[str, Any]) -> None:
    resource = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    namespace = obj["metadata"].get("namespace") if resource.namespaced else None
    resource.server_side_apply(body=obj, name=obj["metadata"]["name"], namespace=namespace,
                               field_manager=MANAGER, force_conflicts=True)


def _established(extensions: client.ApiextensionsV1Api, name: str) -> Callable[[], bool | None]:
    def check() -> bool | None:
        status = extensions.read_custom_resource_definition(name).status
        ok = any(c.type == "Established" and c.status == "True" for c in status.conditions or [])
        return True if ok else None
    return check


@pytest.fixture(scope="module")
def cluster(admin: client.ApiClient) -> Cluster:
    compiled = compile_repo(EXAMPLE / "config")
    artifacts = [a.obj for a in compiled.artifacts]
    consumer_crd = list(_documents(EXAMPLE / "consumer" / "virtualmachinepools.yaml"))
    consumer_crd += list(_documents(GAUGES))
    crds = [o for o in artifacts if o["kind"] == "CustomResourceDefinition"] + consumer_crd
    admission = [o for o in artifacts if o["kind"] in (
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "TenantCapacityLimit")]
    dyn = dynamic.DynamicClient(admin)
    extensions = client.ApiextensionsV1Api(admin)
    for crd in crds:
        _apply(dyn, crd)
    for crd in crds:
        eventually(_established(extensions, crd["metadata"]["name"]))
    dyn = dynamic.DynamicClient(admin)  # rediscover the new kinds
    for obj in sorted(admission, key=lambda o: o["kind"] != "TenantCapacityLimit"):
        eventually(functools.partial(_apply_when_served, dyn, obj))
    core = client.CoreV1Api(admin)
    namespaces = {}
    for name, labels in ((TENANT, {"fivespot.example/tenant": "true"}), (OUTSIDER, {}),
                         *((n, {"fivespot.example/tenant": "true"}) for n in _other_tenants())):
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
        try:
            core.create_namespace(body)
        except ApiException as error:
            if error.status != 409:
                raise
        namespaces[name] = body
    namespaces["default"] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
    objects = client.CustomObjectsApi(admin)
    _wait_for_policies(objects)
    checker = Checker.compile(artifacts + consumer_crd, server=kubeversions.selected())
    return Cluster(objects, checker, namespaces, admin, {})


def _apply_when_served(dyn: dynamic.DynamicClient, obj: dict[str, Any]) -> bool | None:
    try:
        _apply(dyn, obj)
    except (ApiException, dynamic.exceptions.ResourceNotFoundError):
        return None
    return True


def _other_tenants() -> list[str]:
    """Namespaces the example's fixtures use besides TENANT, OUTSIDER and default (each is a
    tenant with its own TenantPolicy, such as agents-gpu)."""
    return sorted({_namespace(c.object) for c in fixture_cases()} - {TENANT, OUTSIDER, "default"})


def _wait_for_policies(objects: client.CustomObjectsApi) -> None:
    """Sentinels: each policy denies its own bad object, and a good object is allowed."""
    sentinels = [
        (_with("metadata.namespace", OUTSIDER), "fivespot-scap-tenancy"),
        (_with("spec.schedule.kind", "CronSchedule"), "fivespot-scap-schedule-kinds"),
        (_with("spec.capacity.activeValue", 11), "fivespot-tenant-limits"),
    ]
    # Every other tenant's own binding too: 11 is over any example tenant's limit.
    for namespace in _other_tenants():
        sentinels.append((_with("spec.capacity.activeValue", 11, _with("metadata.namespace", namespace)),
                          "fivespot-tenant-limits"))
    for obj, policy in sentinels:
        def denied_by(obj: dict[str, Any] = obj, policy: str = policy) -> bool | None:
            outcome = server_verdict(objects, Case("sentinel", obj))
            return True if outcome.policies == {policy} else None
        eventually(denied_by, timeout_s=60)
    eventually(lambda: True if server_verdict(objects, Case("sentinel", BASE)).allowed else None,
               timeout_s=60)


# --- asking the server --------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    allowed: bool
    status: dict[str, Any] | None = None
    """code, reason, message and causes of the denial, as the server returned them."""

    @property
    def policies(self) -> frozenset[str]:
        found = _VAP_DENIAL.search(self.status["message"]) if self.status else None
        return frozenset({found.group(1)}) if found else frozenset()


_VAP_DENIAL: Final = re.compile(r"ValidatingAdmissionPolicy '([^']+)' with binding '[^']+' denied request: ")


def _namespace(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "default")


def _post_raw(objects: client.CustomObjectsApi, namespace: str, body: str) -> None:
    """POST a body as it is (the client would re-encode a decoded one, losing duplicates)."""
    api = objects.api_client
    url = (f"{api.configuration.host}/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
           "?dryRun=All&fieldValidation=Strict")
    response = api.rest_client.pool_manager.request(
        "POST", url, body=body.encode(), headers={"Content-Type": "application/json",
                                                  **api.default_headers})
    if response.status >= 300:
        error = ApiException(status=response.status, reason=response.reason)
        error.body = response.data.decode()
        raise error


@functools.cache
def _plurals() -> dict[tuple[str, str], tuple[str, str]]:
    """(group, kind) -> (version, plural) of every CRD the example compiles to."""
    found = {}
    crds = [a.obj for a in compile_repo(EXAMPLE / "config").artifacts] + list(_documents(GAUGES))
    for crd in crds:
        if crd["kind"] == "CustomResourceDefinition":
            spec = crd["spec"]
            found[(spec["group"], spec["names"]["kind"])] = (spec["versions"][0]["name"],
                                                            spec["names"]["plural"])
    return found


def _resource(obj: dict[str, Any]) -> tuple[str, str, str]:
    """Where the object is posted: its kind's group, version and plural (a fixture may be any
    kind the example installs); ScheduledCapacity for the generated cases."""
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    version, plural = _plurals().get((group, str(obj.get("kind"))), (VERSION, PLURAL))
    return (group, version, plural) if plural != PLURAL else (GROUP, VERSION, PLURAL)


def server_verdict(objects: client.CustomObjectsApi, case: Case, suffix: str = "",
                   author: client.CustomObjectsApi | None = None) -> Outcome:
    """The server's answer to a dry-run create (or update from `case.old`) with kubectl's
    default `fieldValidation=Strict`, sent by `author` (default: the admin, who also makes and
    removes the old object). An update goes to a fresh object named after `suffix`."""
    sender = author or objects
    obj = copy.deepcopy(case.object)
    namespace = _namespace(obj)
    group, version, plural = _resource(obj)
    try:
        if case.raw is not None:
            _post_raw(objects, namespace, case.raw)
        elif case.old is None:
            sender.create_namespaced_custom_object(group, version, namespace, plural, obj,
                                                   dry_run="All", field_validation="Strict")
        else:
            old = copy.deepcopy(case.old)
            new_name = (obj.get("metadata") or {}).get("name")
            # A ScheduledCapacity update goes to a fresh name; another kind keeps its own (a
            # CompositeSchedule's rules read metadata.name: it may not reference itself).
            url_name = f"fidelity-{suffix}" if plural == PLURAL else str(case.old["metadata"]["name"])
            old.setdefault("metadata", {})["name"] = url_name
            created = objects.create_namespaced_custom_object(group, version, _namespace(old),
                                                              plural, old)
            obj.setdefault("metadata", {})["resourceVersion"] = created["metadata"]["resourceVersion"]
            if new_name == case.old["metadata"]["name"]:
                obj["metadata"]["name"] = url_name
            try:
                sender.replace_namespaced_custom_object(group, version, namespace, plural,
                                                        url_name, obj, dry_run="All",
                                                        field_validation="Strict")
            finally:
                objects.delete_namespaced_custom_object(group, version, _namespace(old), plural,
                                                        url_name)
    except ApiException as error:
        return _denial(error, case, suffix)
    return Outcome(True)


def _denial(error: ApiException, case: Case, suffix: str) -> Outcome:
    try:
        body = json.loads(error.body)
    except (TypeError, ValueError):
        return Outcome(False, {"code": error.status, "reason": "", "message": str(error.body),
                               "causes": []})
    answer = {"code": body.get("code"), "reason": body.get("reason"),
              "message": str(body.get("message", "")),
              "causes": list((body.get("details") or {}).get("causes") or [])}
    if case.old is not None:  # the update went to fidelity-SUFFIX: show the object's own name
        name = str((case.object.get("metadata") or {}).get("name"))
        answer["message"] = answer["message"].replace(f'"fidelity-{suffix}"', f'"{name}"')
    return Outcome(False, answer)


# --- the comparison -----------------------------------------------------------------------------


def ours(cluster: Cluster, case: Case) -> Verdict:
    """`fivespot check`'s verdict, reading a raw body as `fivespot check` reads a file."""
    duplicates: tuple[str, ...] = ()
    if case.raw is not None:
        (document,) = parse_documents(case.raw, case.name)
        duplicates = document.duplicates
    return cluster.checker.check(Request(case.operation, case.object, case.old,  # type: ignore[arg-type]
                                         cluster.namespaces.get(_namespace(case.object)),
                                         duplicate_fields=duplicates,
                                         authorizer=user_rules_authorizer(case.user_rules,
                                                                          case.object)))


def disagreement(mine: Verdict, theirs: Outcome) -> str | None:
    """Why the two answers differ (verdict, then the whole Status), or None when they agree."""
    if mine.allowed != theirs.allowed:
        shown = theirs.status["message"] if theirs.status else ""
        return f"allowed: ours {mine.allowed}, server {theirs.allowed} ({shown})"
    if mine.allowed:
        return None
    assert theirs.status is not None
    if theirs.status["reason"] == "BadRequest" and "does not match the name on the URL" in \
            theirs.status["message"]:
        # A rename: fivespot's immutable-name error; the server's handler refuses it before.
        names = {v.field for v in mine.violations}
        return None if names == {"metadata.name"} else f"rename: ours {sorted(map(str, names))}"
    candidates = [mine.status] if mine.status is not None else []
    if theirs.policies and mine.violations and mine.violations[0].source == "vap":
        target = _target(mine)
        candidates = [status.denied_by_policy(target, v) for v in mine.violations if v.source == "vap"]
    wanted = json.dumps(theirs.status, ensure_ascii=False, sort_keys=True)
    got = [json.dumps(c.as_json(), ensure_ascii=False, sort_keys=True) for c in candidates if c]
    if wanted in got:
        return None
    return f"status:\n    server {wanted}\n    ours   {' | '.join(got) or None}"


def _target(verdict: Verdict) -> status.Target:
    assert verdict.status is not None
    found = re.match(r'^(\w+)\.(\S+) "(.*)" is forbidden: ', verdict.status.message)
    assert found, verdict.status.message
    return status.Target("ScheduledCapacity", found.group(2), VERSION, found.group(1), found.group(3))


def test_corpus_is_deterministic_and_large_enough() -> None:
    first, second = corpus(), corpus()
    assert [(c.name, c.object, c.old, c.raw) for c in first] == \
        [(c.name, c.object, c.old, c.raw) for c in second]
    assert len(first) >= 300
    assert sum(1 for c in first if c.old is not None) >= 40
    assert sum(1 for c in first if c.raw is not None) >= 4
    stated = [c for c in first if c.user_rules is not None]
    assert sum(1 for c in stated if c.old is None) >= 3 and sum(1 for c in stated if c.old) >= 3


def test_offline_checker_gives_the_api_servers_whole_answer_on_every_case(cluster: Cluster) -> None:
    cases = corpus()
    disagreements = []
    denied = causes = 0
    for index, case in enumerate(cases):
        mine = ours(cluster, case)
        theirs = server_verdict(cluster.objects, case, suffix=str(index),
                                author=cluster.author(case))
        denied += not theirs.allowed
        causes += len(theirs.status["causes"]) if theirs.status else 0
        problem = disagreement(mine, theirs)
        if problem is not None:
            disagreements.append(f"{case.operation} {case.name}: {problem}")
    agreed = len(cases) - len(disagreements)
    summary = (f"fidelity corpus: {len(cases)} cases ({sum(c.old is not None for c in cases)} "
               f"UPDATE, {denied} denied by the server with {causes} causes); whole Status "
               f"identical (verdict, code, reason, message, every cause) {agreed}/{len(cases)} "
               f"({100 * agreed / len(cases):.1f}%)")
    print(summary)
    assert not disagreements, summary + "\n" + "\n".join(disagreements)


def _warnings(headers: Any) -> list[str]:
    """The texts of a response's `Warning: 299 - "..."` headers, in order."""
    found = []
    for value in headers.getlist("Warning") if hasattr(headers, "getlist") else [headers.get("Warning")]:
        for match in re.finditer(r'299 - "((?:[^"\\]|\\.)*)"', value or ""):
            found.append(re.sub(r"\\(.)", r"\1", match.group(1)))
    return found


@pytest.mark.parametrize("finalizers", [
    ["cleanup"], ["cleanup.example.com"], ["example.com/cleanup", "orphan", "kubernetes", "b", "a"],
    ["Example.com"],
])
def test_the_finalizer_warnings_are_the_api_servers(cluster: Cluster,
                                                    finalizers: list[str]) -> None:
    case = Case(f"finalizers:{finalizers}", _with("metadata.finalizers", finalizers), None, None)
    _, _, headers = cluster.objects.create_namespaced_custom_object_with_http_info(
        GROUP, VERSION, TENANT, PLURAL, copy.deepcopy(case.object), dry_run="All",
        field_validation="Strict")
    theirs = _warnings(headers)
    mine = ours(cluster, case)
    assert mine.allowed
    assert list(mine.warnings) == theirs and theirs, (mine.warnings, theirs)
