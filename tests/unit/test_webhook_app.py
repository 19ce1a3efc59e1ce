"""The Flask views: AdmissionReview in and out, 4xx for what is not a review, health, readiness,
metrics with closed label sets (and not on the serving port), and a fuzz run proving no body
makes the app fail (no 500, no exception)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.test_webhook_review import (
    CAPACITY,
    MACHINES,
    bundle_data,
    guard,
    parse_webhook_bundle,
    pool,
    request,
    scap,
)
from prometheus_client import generate_latest

from fivespot.webhook.app import Runtime, create_app, direct
from fivespot.webhook.bodies import SCAP_REVIEW_BYTES
from fivespot.webhook.metrics import Metrics
from fivespot.webhook.review import Lookups

PROBLEMS: list[str] = []


def make_runtime() -> Runtime:
    return Runtime(parse_webhook_bundle(bundle_data(polyfill=True)),
                   Lookups(MACHINES, lambda n: None, lambda k: ()),
                   Metrics(), lambda: list(PROBLEMS))


@pytest.fixture(scope="module")
def runtime() -> Runtime:
    return make_runtime()


@pytest.fixture(scope="module")
def client(runtime: Runtime) -> FlaskClient:
    return create_app(runtime).test_client()


def envelope(req: dict[str, Any] | None) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


def post(client: FlaskClient, check: str, body: Any) -> Any:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(f"/validate/{check}", data=data, content_type="application/json")


def test_a_review_goes_in_and_the_decided_review_comes_out_with_the_same_uid(client: FlaskClient) -> None:
    response = post(client, "host-governance", envelope(request(scap())))
    assert response.status_code == 200 and response.mimetype == "application/json"
    body = response.get_json()
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    assert body["response"]["uid"] == "uid-1" and body["response"]["allowed"] is False
    assert body["response"]["status"]["message"].startswith("host-governance: ")


def test_each_check_has_its_own_path_as_the_compiled_configuration_names_them(client: FlaskClient) -> None:
    denied_guard = post(client, "target-guard", envelope(guard(pool(labels={"x": "y"}), pool())))
    assert denied_guard.get_json()["response"]["status"]["message"].startswith("target-guard: ")
    outside = request(scap(namespace="team-x", node=None), namespace="team-x")
    denied_policy = post(client, "vap-polyfill", envelope(outside))
    assert denied_policy.get_json()["response"]["status"]["message"].startswith("vap-polyfill: ")
    assert post(client, "nonsense", envelope(request(scap()))).status_code == 404


@pytest.mark.parametrize("body,status", [
    (b"", 400), (b"\xff\xfe garbage", 400), (b"null", 400),
    ({"apiVersion": "admission.k8s.io/v1", "kind": "ConfigMap", "request": {"uid": "u"}}, 400),
    ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}, 400),
])
def test_bodies_that_are_not_reviews_get_a_json_400_saying_why(
        client: FlaskClient, body: Any, status: int) -> None:
    response = post(client, "host-governance", body)
    assert response.status_code == status and "error" in response.get_json()


def test_a_review_missing_fields_gets_a_well_formed_denial_naming_the_field(client: FlaskClient) -> None:
    response = post(client, "target-guard", envelope({"uid": "u-2", "userInfo": {"username": CAPACITY}}))
    body = response.get_json()["response"]
    assert response.status_code == 200 and body["uid"] == "u-2" and body["allowed"] is False
    assert body["status"]["code"] == 400
    assert body["status"]["message"].startswith("target-guard: malformed AdmissionRequest: "
                                                "request.resource is missing")


def test_a_body_over_the_checks_limit_is_refused_with_413_before_it_is_parsed(
        client: FlaskClient) -> None:
    response = post(client, "host-governance", b"x" * (SCAP_REVIEW_BYTES + 1))
    assert response.status_code == 413
    assert str(SCAP_REVIEW_BYTES) in response.get_json()["error"]


def test_only_post_is_served_on_review_paths(client: FlaskClient) -> None:
    assert client.get("/validate/host-governance").status_code == 405


def test_readiness_reports_each_problem_and_liveness_does_not_depend_on_them(client: FlaskClient) -> None:
    assert client.get("/readyz").status_code == 200
    PROBLEMS.append("the scheduledmachines cache is not synced")
    try:
        ready = client.get("/readyz")
        assert ready.status_code == 503 and b"scheduledmachines cache is not synced" in ready.data
        assert client.get("/healthz").status_code == 200
    finally:
        PROBLEMS.clear()


def test_the_serving_port_does_not_serve_the_metrics(client: FlaskClient) -> None:
    assert client.get("/metrics").status_code == 404


def series(runtime: Runtime) -> set[str]:
    return {line.split(" ")[0] for line in generate_latest(runtime.metrics.registry).decode()
            .splitlines() if line and not line.startswith("#")}


def test_requests_naming_no_check_add_no_metric_series_whatever_their_path(
        runtime: Runtime) -> None:
    client = create_app(runtime).test_client()
    post(client, "no-such-check-0", b"{}")
    before = series(runtime)
    for index in range(50):
        assert post(client, f"no-such-check-{index}-{'x' * index}", b"{}").status_code == 404
    assert series(runtime) == before
    assert 'fivespot_webhook_rejected_bodies_total{check="unknown",status="404"}' in before


def test_metrics_count_latency_by_check_and_verdict(client: FlaskClient, runtime: Runtime) -> None:
    post(client, "host-governance", envelope(request(scap(node=None))))
    text = generate_latest(runtime.metrics.registry).decode()
    assert 'fivespot_webhook_admission_duration_seconds_count{check="host-governance",' \
           'verdict="allowed"}' in text
    assert 'verdict="denied"' in text


# --- fuzzing -----------------------------------------------------------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40),
                     st.floats(allow_nan=False), st.text(max_size=12))
_json = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=4)
_names = st.sampled_from(["", "agents", "team-x", "5spot-system", "kube-system"])
_meta = st.fixed_dictionaries({}, optional={
    "name": st.one_of(st.text(max_size=8), _json), "namespace": _names,
    "labels": st.dictionaries(st.text(max_size=6), st.one_of(st.text(max_size=6), _json), max_size=3),
    "resourceVersion": st.text(max_size=4)})
_spec = st.fixed_dictionaries({}, optional={
    "nodeName": st.one_of(st.sampled_from(["worker-3", "worker-9", ""]), _json),
    "warmReplicas": st.one_of(st.integers(-3, 40), _json),
    "template": _json,
    "schedule": st.one_of(st.fixed_dictionaries({"kind": st.sampled_from(
        ["ManualSchedule", "Bogus"]), "name": st.text(max_size=5)}), _json),
    "targetRef": st.one_of(st.fixed_dictionaries({
        "apiVersion": st.sampled_from(["pools.agents.example.com/v1alpha1", "v1", "a/b/c", ""]),
        "kind": st.sampled_from(["VirtualMachinePool", "Deployment"]), "name": st.text(max_size=5)}),
        _json),
    "capacity": st.one_of(st.fixed_dictionaries({
        "path": st.sampled_from(["spec.warmReplicas", "spec.other", ""]),
        "activeValue": st.one_of(st.integers(-5, 50), _json)}), _json),
    "handback": _json, "enabled": _json})
_object = st.one_of(st.none(), _json, st.fixed_dictionaries(
    {"apiVersion": st.sampled_from(["5spot.finos.org/v1alpha1", "pools.agents.example.com/v1alpha1"]),
     "kind": st.sampled_from(["ScheduledCapacity", "VirtualMachinePool"])},
    optional={"metadata": st.one_of(_meta, _json), "spec": st.one_of(_spec, _json),
              "status": _json}))
_resource = st.one_of(_json, st.fixed_dictionaries({
    "group": st.sampled_from(["5spot.finos.org", "pools.agents.example.com", "", "apps"]),
    "version": st.sampled_from(["v1alpha1", "v1"]),
    "resource": st.sampled_from(["scheduledcapacities", "virtualmachinepools", "pods"])}))
_request = st.fixed_dictionaries(
    {"uid": st.text(min_size=1, max_size=8)},
    optional={
        "operation": st.one_of(st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT"]), _json),
        "namespace": st.one_of(_names, _json), "name": st.one_of(st.text(max_size=6), _json),
        "resource": _resource, "kind": _json,
        "subResource": st.one_of(st.sampled_from(["", "status", "scale"]), _json),
        "userInfo": st.one_of(_json, st.fixed_dictionaries({"username": st.sampled_from(
            [CAPACITY, "alice", ""])}, optional={"groups": _json})),
        "object": _object, "oldObject": _object, "dryRun": _json, "options": _json})
_review = st.one_of(
    st.fixed_dictionaries({"apiVersion": st.just("admission.k8s.io/v1"),
                           "kind": st.just("AdmissionReview"), "request": _request}),
    st.fixed_dictionaries({}, optional={"apiVersion": _json, "kind": _json, "request": _json}))
_body = st.one_of(_review.map(lambda r: json.dumps(r).encode()),
                  st.binary(max_size=64), _json.map(lambda j: json.dumps(j).encode()))

CHECKS = ("host-governance", "target-guard", "vap-polyfill")
FUZZ_BODIES = 10_000
VARIANTS = 5
"""Each generated review is posted as-is to each check, then truncated and with one byte
changed (to a check chosen by the same draw): five bodies per example, so hypothesis's own cost
(most of the run time) is paid once per five bodies."""


def variants(body: bytes, cut: int, position: int, byte: int) -> list[tuple[str, bytes]]:
    truncated = body[:cut % (len(body) + 1)]
    flipped = bytearray(body or b" ")
    flipped[position % len(flipped)] = byte
    chosen = CHECKS[position % len(CHECKS)]
    return [(check, body) for check in CHECKS] + [(chosen, truncated), (chosen, bytes(flipped))]


def assert_well_answered(check: str, body: bytes, response: Any) -> None:
    assert response.status_code in (200, 400), (response.status_code, body[:200])
    payload = response.get_json()
    if response.status_code == 400:
        assert isinstance(payload["error"], str)
        return
    review = payload["response"]
    assert payload["kind"] == "AdmissionReview" and isinstance(review["allowed"], bool)
    assert review["uid"] == json.loads(body)["request"]["uid"]
    if not review["allowed"]:
        assert review["status"]["message"].startswith(check + ": ")


def test_ten_thousand_generated_bodies_never_get_a_500_or_raise_in_a_check() -> None:
    runtime = make_runtime()
    client = create_app(runtime).test_client()
    posted = {"count": 0}

    @settings(max_examples=FUZZ_BODIES // VARIANTS, deadline=None, database=None,
              derandomize=True, suppress_health_check=list(HealthCheck))
    @given(body=_body, cut=st.integers(0, 2**16), position=st.integers(0, 2**16),
           byte=st.integers(0, 255))
    def one(body: bytes, cut: int, position: int, byte: int) -> None:
        for check, variant in variants(body, cut, position, byte):
            posted["count"] += 1
            response = client.post(f"/validate/{check}", data=variant,
                                   content_type="application/json")
            assert_well_answered(check, variant, response)

    one()
    assert posted["count"] >= FUZZ_BODIES
    assert sum(runtime.metrics.errors.labels(c)._value.get() for c in CHECKS) == 0


@pytest.mark.parametrize("check,body", [
    ("host-governance", envelope(request(scap()))),
    ("target-guard", envelope(guard(pool(labels={"x": "y"}), pool()))),
    ("target-guard", envelope(guard(pool(), pool()))),
    ("vap-polyfill", envelope(request(scap(namespace="team-x", node=None), namespace="team-x"))),
    ("target-guard", b"\xff\xfe garbage"),
    ("host-governance", {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
])
def test_the_servers_direct_answer_to_a_review_is_the_flask_views_answer_byte_for_byte(
        client: FlaskClient, runtime: Runtime, check: str, body: Any) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    viewed = post(client, check, data)
    answered = direct(runtime)("POST", f"/validate/{check}", data)
    assert answered is not None
    status, headers, payload = answered
    assert (status, payload) == (viewed.status_code, viewed.get_data())
    assert dict(headers) == {b"content-type": b"application/json",
                             b"content-length": str(len(payload)).encode()}


@pytest.mark.parametrize("method,path", [
    ("GET", "/healthz"), ("GET", "/readyz"), ("POST", "/validate/nonsense"),
    ("GET", "/validate/target-guard"), ("POST", "/validate/"), ("POST", "/metrics"),
])
def test_everything_but_a_review_of_a_known_check_is_left_to_the_flask_app(
        runtime: Runtime, method: str, path: str) -> None:
    assert direct(runtime)(method, path, b"{}") is None
