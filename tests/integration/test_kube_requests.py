"""`fivespot.runtime.kube`'s request path against the real API server: the credentials a client
was loaded with (a client certificate, a projected ServiceAccount token file that rotates), the
query spelled as the server reads it, and the timeouts, now that requests go over the client's
urllib3 pool without its generated request path (issue 39)."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.config.incluster_config import InClusterConfigLoader

from fivespot.devcluster.clients import (
    _server_and_ca,
    admin_client,
    ensure_service_account,
    service_account_token,
)
from fivespot.runtime import kube

pytestmark = pytest.mark.integration

REVIEW = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def whoami(api: client.ApiClient) -> str:
    """The username the API server authenticated this client's request as."""
    answer = kube.request(api, "POST", REVIEW, body={
        "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    return str(answer["status"]["userInfo"]["username"])


@pytest.fixture
def tokens(admin: client.ApiClient, namespace: str) -> Iterator[dict[str, str]]:
    """Tokens of two ServiceAccounts of `namespace`, by name."""
    for name in ("first", "second"):
        ensure_service_account(admin, namespace, name)
    yield {name: service_account_token(admin, namespace, name) for name in ("first", "second")}


def in_cluster_client(kubeconfig: Path, token_file: Path) -> client.ApiClient:
    """A client loaded as `kube.load_client` loads one in a pod (the `kubernetes` client's
    in-cluster loader), from `token_file`, re-read whenever the client asks for it (a pod's
    loader waits a minute between two reads: the test does not)."""
    server, ca_file = _server_and_ca(kubeconfig)
    host, port = server.removeprefix("https://").rsplit(":", 1)
    loader = InClusterConfigLoader(
        token_filename=str(token_file), cert_filename=str(ca_file),
        environ={"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port})
    loader._token_refresh_period = datetime.timedelta(0)
    configuration = client.Configuration()
    loader.load_and_set(configuration)
    return client.ApiClient(configuration)


def test_a_client_certificate_authenticates_as_through_the_generated_client(
        kubeconfig: Path) -> None:
    api = kube.load_client(kubeconfig)
    generated = admin_client(kubeconfig)
    try:
        review = client.AuthenticationV1Api(generated).create_self_subject_review(
            client.V1SelfSubjectReview())
        assert whoami(api) == review.status.user_info.username
        assert not whoami(api).startswith("system:anonymous")
    finally:
        api.close()
        generated.close()


def test_a_rotated_service_account_token_file_is_used_within_the_refresh_interval(
        kubeconfig: Path, namespace: str, tokens: dict[str, str], tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(tokens["first"])
    api = in_cluster_client(kubeconfig, token_file)
    try:
        assert whoami(api) == f"system:serviceaccount:{namespace}:first"
        token_file.write_text(tokens["second"])
        time.sleep(kube.AUTH_REFRESH_S + 0.2)
        assert whoami(api) == f"system:serviceaccount:{namespace}:second"
    finally:
        api.close()


def test_after_a_401_the_next_request_reads_the_token_file_again_at_once(
        kubeconfig: Path, namespace: str, tokens: dict[str, str], tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("not-a-token")
    api = in_cluster_client(kubeconfig, token_file)
    try:
        with pytest.raises(kube.ApiError) as refused:
            whoami(api)
        assert refused.value.status == 401
        token_file.write_text(tokens["first"])
        assert whoami(api) == f"system:serviceaccount:{namespace}:first"
    finally:
        api.close()


def test_query_parameters_reach_the_server_as_it_reads_them(
        namespace: str, kubeconfig: Path) -> None:
    api = kube.load_client(kubeconfig)
    try:
        path = kube.resource_path("", "v1", "configmaps", namespace)
        for name in ("a-b", "c"):
            kube.request(api, "POST", path, body={"metadata": {"name": name,
                                                               "labels": {"pick": name[0]}}})
        picked = kube.request(api, "GET", path, query={"labelSelector": "pick in (a)",
                                                       "limit": 10, "continue": None})
        assert [i["metadata"]["name"] for i in picked["items"]] == ["a-b"]
        dry: dict[str, Any] = kube.request(api, "POST", path, query={"dryRun": "All"},
                                           body={"metadata": {"name": "dry"}})
        assert dry["metadata"]["name"] == "dry"
        with pytest.raises(kube.ApiError) as missing:
            kube.request(api, "GET", kube.resource_path("", "v1", "configmaps", namespace, "dry"))
        assert missing.value.not_found
    finally:
        api.close()


def test_a_single_timeout_bounds_the_whole_request(kubeconfig: Path, namespace: str) -> None:
    api = kube.load_client(kubeconfig)
    try:
        path = kube.resource_path("", "v1", "configmaps", namespace)
        started = time.monotonic()
        with pytest.raises(urllib3.exceptions.ReadTimeoutError):
            # a watch the server would hold open for 30 s, read to its end (the answer's body is
            # read after `_raw`, so its timeout is urllib3's, as it was through the generated path)
            kube.request(api, "GET", path, query={"watch": True, "timeoutSeconds": 30},
                         timeout=1.0)
        assert time.monotonic() - started < 10
    finally:
        api.close()


def test_a_read_timeout_bounds_each_read_of_a_stream(kubeconfig: Path, namespace: str) -> None:
    api = kube.load_client(kubeconfig)
    try:
        path = kube.resource_path("", "v1", "configmaps", namespace)
        response = kube.stream(api, path, query={"watch": True, "timeoutSeconds": 30},
                               timeout=(5.0, 1.0))
        started = time.monotonic()
        try:
            with pytest.raises(urllib3.exceptions.ReadTimeoutError):
                for _ in response.response.stream(1024):
                    pass
            assert time.monotonic() - started < 10
        finally:
            response.response.release_conn()
    finally:
        api.close()
