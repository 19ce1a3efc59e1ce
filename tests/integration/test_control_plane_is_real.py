"""The local control plane is the real thing: CRD CEL, VAP, RBAC and webhooks are all enforced.

Each test proves one enforcement path of the real kube-apiserver that later features rely on.
"""

from __future__ import annotations

import base64
import datetime
import json
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from fivespot.devcluster.certs import issue, new_ca
from tests.integration.conftest import AsServiceAccount

T = TypeVar("T")


def eventually(check: Callable[[], T | None], timeout_s: float = 30.0, interval_s: float = 0.2) -> T:
    """Poll until `check` returns something other than None (policies take effect asynchronously)."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result is not None:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s")
        time.sleep(interval_s)


def _configmap(name: str, data: dict[str, str]) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data=data)


def _denial(call: Callable[[], object]) -> ApiException | None:
    try:
        call()
    except ApiException as error:
        return error
    return None


def test_crd_validation_rule_rejects_a_bad_object_with_the_rules_message(
    admin: client.ApiClient, namespace: str
) -> None:
    group = f"proof{uuid.uuid4().hex[:8]}.fivespot.test"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
            "versions": [{
                "name": "v1", "served": True, "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                    "type": "object",
                    "properties": {"replicas": {"type": "integer"}},
                    "x-kubernetes-validations": [
                        {"rule": "self.replicas <= 10", "message": "replicas must be at most 10"}
                    ],
                }}}},
            }],
        },
    }
    extensions = client.ApiextensionsV1Api(admin)
    extensions.create_custom_resource_definition(crd)

    def established() -> bool | None:
        status = extensions.read_custom_resource_definition(f"widgets.{group}").status
        ok = any(c.type == "Established" and c.status == "True" for c in status.conditions or [])
        return True if ok else None

    eventually(established)
    objects = client.CustomObjectsApi(admin)

    def create(replicas: int) -> Callable[[], object]:
        body = {"apiVersion": f"{group}/v1", "kind": "Widget",
                "metadata": {"name": f"w{replicas}"}, "spec": {"replicas": replicas}}
        return lambda: objects.create_namespaced_custom_object(group, "v1", namespace, "widgets", body)

    # The resource is served a moment after Established; 404 until then.
    def denied_by_rule() -> ApiException | None:
        error = _denial(create(11))
        return None if error is None or error.status == 404 else error

    error = eventually(denied_by_rule)
    assert error.status == 422
    assert "replicas must be at most 10" in json.loads(error.body)["message"]
    create(3)()


def test_validating_admission_policy_denies_an_object_once_it_takes_effect(
    admin: client.ApiClient, namespace: str
) -> None:
    name = f"deny-forbidden-{namespace}"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]},
            "validations": [{
                "expression": "!has(object.data) || !('forbidden' in object.data)",
                "messageExpression": "'configmap ' + object.metadata.name + ' may not hold key forbidden'",
            }],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {
                "matchLabels": {"kubernetes.io/metadata.name": namespace}}},
        },
    }
    registration = client.AdmissionregistrationV1Api(admin)
    registration.create_validating_admission_policy(policy)
    registration.create_validating_admission_policy_binding(binding)
    core = client.CoreV1Api(admin)

    def sentinel_denied() -> ApiException | None:
        return _denial(lambda: core.create_namespaced_config_map(
            namespace, _configmap("sentinel", {"forbidden": "x"}), dry_run="All"))

    error = eventually(sentinel_denied)
    assert error.status == 422
    assert "configmap sentinel may not hold key forbidden" in json.loads(error.body)["message"]
    core.create_namespaced_config_map(namespace, _configmap("fine", {"allowed": "x"}))


def test_service_account_is_forbidden_without_rbac_and_allowed_with_a_role(
    admin: client.ApiClient, namespace: str, as_service_account: AsServiceAccount
) -> None:
    reader = client.CoreV1Api(as_service_account(namespace, "reader"))
    with pytest.raises(ApiException) as forbidden:
        reader.list_namespaced_config_map(namespace)
    assert forbidden.value.status == 403
    assert f"system:serviceaccount:{namespace}:reader" in json.loads(forbidden.value.body)["message"]

    rbac = client.RbacAuthorizationV1Api(admin)
    rbac.create_namespaced_role(namespace, client.V1Role(
        metadata=client.V1ObjectMeta(name="read-configmaps"),
        rules=[client.V1PolicyRule(api_groups=[""], resources=["configmaps"], verbs=["list"])]))
    rbac.create_namespaced_role_binding(namespace, client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name="reader"),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role",
                                  name="read-configmaps"),
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name="reader", namespace=namespace)]))

    def allowed() -> bool | None:  # RBAC caches refresh asynchronously
        try:
            reader.list_namespaced_config_map(namespace)
        except ApiException as error:
            assert error.status == 403
            return None
        return True

    eventually(allowed)
    with pytest.raises(ApiException) as still_forbidden:
        reader.delete_namespaced_config_map("anything", namespace)
    assert still_forbidden.value.status == 403


class _ReviewHandler(BaseHTTPRequestHandler):
    calls: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server naming)
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).calls.append(review)
        request = review["request"]
        name = request["object"]["metadata"].get("name", "")
        allowed = not name.startswith("blocked")
        response: dict[str, Any] = {"uid": request["uid"], "allowed": allowed}
        if not allowed:
            response["status"] = {"code": 403, "message": f"proof-webhook: {name} is blocked"}
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "response": response}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def tls_review_server(tmp_path: Path) -> Iterator[tuple[int, bytes]]:
    now = datetime.datetime.now(datetime.timezone.utc)
    ca, ca_key = new_ca("proof-webhook-ca", now)
    serving = issue(ca, ca_key, "proof-webhook", now, ip_addresses=("127.0.0.1",), server=True)
    (tmp_path / "tls.crt").write_bytes(serving.cert_pem)
    (tmp_path / "tls.key").write_bytes(serving.key_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    _ReviewHandler.calls = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ReviewHandler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], ca.cert_pem
    finally:
        server.shutdown()
        server.server_close()


def test_api_server_calls_a_webhook_over_tls_and_relays_its_denial(
    admin: client.ApiClient, namespace: str, tls_review_server: tuple[int, bytes]
) -> None:
    port, ca_pem = tls_review_server
    name = f"proof-{namespace}"
    configuration = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "proof.fivespot.test",
            "clientConfig": {"url": f"https://127.0.0.1:{port}/validate",
                             "caBundle": base64.b64encode(ca_pem).decode()},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": 5,
        }],
    }
    client.AdmissionregistrationV1Api(admin).create_validating_webhook_configuration(configuration)
    core = client.CoreV1Api(admin)

    def denied() -> ApiException | None:
        return _denial(lambda: core.create_namespaced_config_map(
            namespace, _configmap("blocked-sentinel", {}), dry_run="All"))

    error = eventually(denied)
    assert "proof-webhook: blocked-sentinel is blocked" in json.loads(error.body)["message"]
    core.create_namespaced_config_map(namespace, _configmap("welcome", {}))
    reviewed = [c["request"]["object"]["metadata"]["name"] for c in _ReviewHandler.calls]
    assert "welcome" in reviewed
    assert all(c["request"]["namespace"] == namespace for c in _ReviewHandler.calls)
