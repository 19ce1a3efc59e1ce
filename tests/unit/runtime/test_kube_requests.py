"""`fivespot.runtime.kube`'s lean request path, the parts that need no API server: the query as
the server reads it, the timeouts as the generated client reads `_request_timeout`, and the
credentials hook run at most once every AUTH_REFRESH_S (and at once after a 401). Against the
real API server: tests/integration/test_kube_requests.py."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from fivespot.runtime import kube

pytestmark = pytest.mark.unit


def test_the_query_spells_booleans_as_the_server_does_and_drops_nones() -> None:
    assert kube.query_string({"watch": True, "allowWatchBookmarks": False, "limit": 500,
                              "continue": None}) == \
        "?watch=true&allowWatchBookmarks=false&limit=500"


def test_the_query_quotes_selectors() -> None:
    assert kube.query_string({"labelSelector": "pick in (a, b)", "fieldSelector": "a=b&c"}) == \
        "?labelSelector=pick%20in%20%28a%2C%20b%29&fieldSelector=a%3Db%26c"


def test_no_parameters_make_no_query() -> None:
    assert kube.query_string(None) == kube.query_string({"continue": None}) == ""


def test_a_pair_is_the_connect_and_read_timeouts_and_a_number_the_whole_request() -> None:
    pair = kube._timeout((5.0, 30.0))
    assert pair is not None and (pair.connect_timeout, pair.read_timeout, pair.total) == \
        (5.0, 30.0, None)
    whole = kube._timeout(2.5)
    assert whole is not None and whole.total == 2.5
    assert kube._timeout(None) is None and kube._timeout(0) is None


def test_an_apply_patch_given_as_text_is_sent_as_it_is() -> None:
    text = '{"apiVersion": "v1", "kind": "ConfigMap"}'
    assert kube.encode_body(text, "application/apply-patch+yaml") == text.encode()
    assert kube.encode_body(b"kind: ConfigMap\n", "application/apply-patch+yaml") == b"kind: ConfigMap\n"


def test_a_structure_is_sent_as_json_whatever_the_content_type() -> None:
    assert kube.encode_body({"a": 1}, "application/apply-patch+yaml") == b'{"a": 1}'
    assert kube.encode_body({"a": 1}, kube.MERGE_PATCH) == b'{"a": 1}'
    assert kube.encode_body([{"op": "add"}], kube.JSON_PATCH) == b'[{"op": "add"}]'


def test_a_json_content_type_sends_even_text_as_json() -> None:
    assert kube.encode_body("x", kube.JSON) == b'"x"'
    assert kube.encode_body("x", None) == b'"x"'


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    found = Clock()
    monkeypatch.setattr("fivespot.runtime.kube.time.monotonic", found)
    return found


def token_client(calls: list[int]) -> client.ApiClient:
    """A client whose credentials hook counts its runs and hands out a new token each time."""
    configuration = client.Configuration(host="https://127.0.0.1:6443")
    configuration.api_key = {"authorization": "token-0"}  # as a loader leaves it

    def hook(config: Any) -> None:
        calls.append(1)
        config.api_key = {"authorization": f"token-{len(calls)}"}
        config.api_key_prefix = {"authorization": "Bearer"}

    configuration.refresh_api_key_hook = hook
    return client.ApiClient(configuration)


def test_the_credentials_hook_runs_once_per_refresh_interval(clock: Clock) -> None:
    calls: list[int] = []
    api = token_client(calls)
    first = kube._prepare(api)
    assert first.headers["authorization"] == "Bearer token-1"
    assert first.base == "https://127.0.0.1:6443" and first.headers["Accept"] == kube.JSON
    clock.now += kube.AUTH_REFRESH_S / 2
    assert kube._prepare(api) is first and len(calls) == 1
    clock.now += kube.AUTH_REFRESH_S
    assert kube._prepare(api).headers["authorization"] == "Bearer token-2"


def test_after_a_401_the_credentials_hook_runs_on_the_next_request(clock: Clock) -> None:
    calls: list[int] = []
    api = token_client(calls)
    kube._prepare(api)
    kube._forget_credentials(api)
    assert kube._prepare(api).headers["authorization"] == "Bearer token-2"


def test_the_client_s_default_headers_go_with_every_request(clock: Clock) -> None:
    api = client.ApiClient(client.Configuration(host="https://127.0.0.1:6443"),
                           header_name="X-Probe", header_value="1")
    headers = kube._prepare(api).headers
    assert headers["X-Probe"] == "1" and headers["User-Agent"] == api.user_agent
    assert "authorization" not in headers
