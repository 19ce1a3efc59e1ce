"""Raw, JSON-in JSON-out access to the API server over the `kubernetes` client's connection.

Controllers work on plain dicts (what the API server sends), not on the client's generated
models: the kinds here are custom resources anyway, deserializing thousands of objects into
models costs memory and time, and a merge patch must go out with exactly the content type the
caller chose. This module is the only place that builds URLs and interprets HTTP statuses.
"""

from __future__ import annotations

import functools
import json
import os
import ssl
import threading
import time
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, urlencode

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.rest import RESTResponse

from fivespot.runtime.kubeconfig import ClusterAccess, KubeconfigRefused, Problem
from fivespot.runtime.kubeconfig import parse as parse_kubeconfig
from fivespot.runtime.tlskeys import load_key_pair

ApiClient = client.ApiClient
"""The connection every request goes over (the `kubernetes` client's pool and credentials)."""

MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"
JSON: Final = "application/json"
DEFAULT_TIMEOUT: Final = (5.0, 30.0)
"""(connect, read) seconds for ordinary requests."""


class ApiError(Exception):
    """A non-2xx answer (or no answer) from the API server."""

    def __init__(self, status: int, reason: str, message: str, body: Mapping[str, Any] | None = None):
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        return self.status == 410

    @property
    def transient(self) -> bool:
        """Worth retrying unchanged: throttling, timeouts, server errors, no connection."""
        return self.status in (0, 408, 429) or self.status >= 500


class KubeconfigError(ValueError):
    """No usable credentials: the kubeconfig does not load, or there is none and no in-cluster
    ServiceAccount."""


POOL_SIZE: Final = 32
"""Connections kept per host: every informer holds one open for its watch, and workers and lease
threads need their own; urllib3's default (5 per CPU) would open and drop TLS connections."""
SPARE_CONNECTIONS: Final = 16
"""Beyond one per worker: the watches (one per informer) and the lease renewals."""


def pool_for(workers: int) -> int:
    """The connection pool of a process with `workers` reconcile threads: one connection each
    plus the watches and leases, never fewer than POOL_SIZE. A smaller pool does not block: the
    surplus requests open a TLS connection each and drop it again, at a market open of all things."""
    return max(POOL_SIZE, workers + SPARE_CONNECTIONS)


def load_client(kubeconfig: Path | None = None, *, pool_size: int = POOL_SIZE) -> client.ApiClient:
    """A client from `kubeconfig`, else $KUBECONFIG, else the in-cluster ServiceAccount, keeping
    up to `pool_size` connections (`pool_for(workers)` in a controller).

    Raises KubeconfigError, saying which of them failed and why."""
    path = kubeconfig or (Path(os.environ["KUBECONFIG"]) if os.environ.get("KUBECONFIG") else None)
    configuration = client.Configuration()
    try:
        if path is not None:
            config.load_kube_config(config_file=str(path), client_configuration=configuration)
        else:
            config.load_incluster_config(client_configuration=configuration)
    except (config.ConfigException, yaml.YAMLError, OSError, ValueError, TypeError,
            KeyError) as error:
        # The client raises ConfigException for most problems and lets YAML, file and
        # structure errors through as they are.
        reason = " ".join(str(error).split())
        if path is not None:
            raise KubeconfigError(f"cannot load kubeconfig {path}: {reason}") from error
        raise KubeconfigError("no --kubeconfig or $KUBECONFIG, and no in-cluster ServiceAccount "
                              f"({reason}): pass --kubeconfig") from error
    configuration.connection_pool_maxsize = pool_size
    return client.ApiClient(configuration)


def client_from_kubeconfig(data: bytes, *, source: str = "kubeconfig") -> client.ApiClient:
    """A client from kubeconfig bytes that fivespot does not trust (CAPI's `<cluster>-kubeconfig`
    Secret): `fivespot.runtime.kubeconfig.parse`, then `client_for`. The `kubernetes` client's own loader
    never sees them (it would run their exec plugins and read their files).

    Raises KubeconfigRefused naming `source` and the fields it refuses."""
    return client_for(parse_kubeconfig(data, source), source=source)


def client_for(access: ClusterAccess, *, source: str,
               pool_size: int = POOL_SIZE) -> client.ApiClient:
    """A client for `access.server` that trusts `access.ca_pem` alone and presents only what
    `access` holds: its client certificate (loaded into an SSL context, no file left behind) and
    its token. The process's proxy settings apply as for every client; nothing in `access` can
    choose a proxy, a file, a command or skip the server's certificate check.

    Raises KubeconfigRefused naming `source` when the CA, certificate or key do not load."""
    try:
        context = ssl.create_default_context(cadata=access.ca_pem.decode("ascii"))
    except (ssl.SSLError, UnicodeDecodeError, ValueError) as error:
        raise _unloadable(source, f"{access.cluster_path}.certificate-authority-data",
                          "does not load as CA certificates", error) from None
    if access.client_certificate_pem is not None and access.client_key_pem is not None:
        try:
            load_key_pair(context, access.client_certificate_pem, access.client_key_pem)
        except (ssl.SSLError, ValueError) as error:
            raise _unloadable(source, f"{access.user_path}.client-certificate-data and "
                              "client-key-data",
                              "do not load as a certificate and its private key", error) from None
    configuration = client.Configuration(host=access.server)
    configuration.connection_pool_maxsize = pool_size
    if access.token is not None:
        configuration.api_key = {"authorization": access.token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
    api = client.ApiClient(configuration)
    # urllib3 passes `ssl_context` to every connection of its pools: the CA and client key above
    # are then the only TLS material the client has (no ca_certs, cert_file or key_file).
    api.rest_client.pool_manager.connection_pool_kw["ssl_context"] = context
    return api


def _unloadable(source: str, path: str, why: str, error: Exception) -> KubeconfigRefused:
    """OpenSSL's reason code (KEY_VALUES_MISMATCH, NO_START_LINE), never its text or the data."""
    code = getattr(error, "reason", None)
    detail = f" ({code})" if isinstance(code, str) and code.replace("_", "").isalnum() else ""
    return KubeconfigRefused(source, (Problem(path, why + detail),))


def load_cli_client(kubeconfig: Path | None = None, context: str | None = None) -> client.ApiClient:
    """A client the way kubectl picks one: `kubeconfig` (else $KUBECONFIG, else ~/.kube/config)
    and its `context` (else the current one); in a pod with neither, the in-cluster
    ServiceAccount. Raises ConfigError with kubectl-like wording when nothing fits."""
    configuration = client.Configuration()
    default = Path(os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or Path.home() / ".kube" / "config")
    in_cluster = kubeconfig is None and not default.exists() and os.environ.get("KUBERNETES_SERVICE_HOST")
    if not in_cluster and not (kubeconfig or default).exists():
        raise ConfigError(f"no kubeconfig: {kubeconfig or default} does not exist (pass "
                          "--kubeconfig, set KUBECONFIG, or run in a pod)")
    try:
        if in_cluster:
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(config_file=str(kubeconfig) if kubeconfig else None,
                                    context=context, client_configuration=configuration)
    except (config.ConfigException, OSError, ValueError) as error:
        where = kubeconfig or default
        raise ConfigError(f"cannot use kubeconfig {where}"
                          + (f" (context {context})" if context else "") + f": {error}") from None
    configuration.connection_pool_maxsize = POOL_SIZE
    return client.ApiClient(configuration)


class ConfigError(Exception):
    """No usable cluster credentials: the message names the kubeconfig and context tried."""


SERVICE_ACCOUNT_NAMESPACE: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def cli_namespace(kubeconfig: Path | None = None, context: str | None = None) -> str:
    """The namespace kubectl would use with `load_cli_client`'s kubeconfig and context: the
    context's own, else `default`; in a pod with no kubeconfig, the ServiceAccount's. Only reads
    the file (no credential plugin runs). Raises ConfigError as `load_cli_client` does."""
    default = Path(os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or Path.home() / ".kube" / "config")
    if kubeconfig is None and not default.exists() and SERVICE_ACCOUNT_NAMESPACE.exists():
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    where = kubeconfig or default
    try:
        contexts, current = config.list_kube_config_contexts(config_file=str(where))
    except (config.ConfigException, OSError, ValueError, yaml.YAMLError) as error:
        raise ConfigError(f"cannot use kubeconfig {where}: {error}") from None
    chosen = current if context is None else next(
        (c for c in contexts or [] if c.get("name") == context), None)
    if chosen is None:
        raise ConfigError(f"cannot use kubeconfig {where}: no context {context or '(current)'}")
    namespace = (chosen.get("context") or {}).get("namespace")
    return str(namespace) if namespace else "default"


def resource_path(
    group: str,
    version: str,
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """`/api/v1/...` for the core group, `/apis/GROUP/VERSION/...` otherwise."""
    parts = ["/api", version] if group == "" else ["/apis", group, version]
    if namespace is not None:
        parts += ["namespaces", quote(namespace, safe="")]
    parts.append(plural)
    if name is not None:
        parts.append(quote(name, safe=""))
        if subresource is not None:
            parts.append(subresource)
    return "/".join(parts)


AUTH_REFRESH_S: Final = 1.0
"""Seconds a client's request headers (its Authorization above all) are reused before its
credentials hook runs again. The `kubernetes` client runs that hook on every request — it
re-reads a projected ServiceAccount token once its minute is up, a kubeconfig's expiring token
when it expires — and the hook re-sets the host, which re-reads the environment's proxies: at a
market open, a fair share of the controller's CPU per write. Once a second sees a rotated token at
most a second later than the client would; a 401 answer drops the headers at once."""


@dataclass(frozen=True)
class _Prepared:
    """What every request of one client sends until `until` (time.monotonic())."""

    base: str
    headers: Mapping[str, str]
    until: float


_prepared: weakref.WeakKeyDictionary[client.ApiClient, _Prepared] = weakref.WeakKeyDictionary()
_prepared_lock = threading.Lock()


def _prepare(api: client.ApiClient) -> _Prepared:
    """The client's base URL and headers (its default headers, cookie and credentials), as its
    generated request path would send them, taken afresh every AUTH_REFRESH_S."""
    now = time.monotonic()
    prepared = _prepared.get(api)
    if prepared is not None and now < prepared.until:
        return prepared
    headers: dict[str, str] = {"Accept": JSON, **api.default_headers}
    if api.cookie:
        headers["Cookie"] = api.cookie
    queries: list[tuple[str, str]] = []
    api.update_params_for_auth(headers, queries, ["BearerToken"], "", "GET", None)
    if queries:  # never from a kubeconfig: the generated client knows no credential in the query
        raise KubeconfigError("credentials in the query string are not supported")
    prepared = _Prepared(api.configuration.host, headers, now + AUTH_REFRESH_S)
    with _prepared_lock:
        _prepared[api] = prepared
    return prepared


def _forget_credentials(api: client.ApiClient) -> None:
    """After a 401: the next request runs the credentials hook again (a rotated token)."""
    with _prepared_lock:
        _prepared.pop(api, None)


def query_string(query: Mapping[str, Any] | None) -> str:
    """`?k=v&...` for the parameters that are not None (booleans as `true`/`false`, as the API
    server and the generated client spell them), or nothing."""
    params = [(k, ("true" if v else "false") if isinstance(v, bool) else str(v))
              for k, v in (query or {}).items() if v is not None]
    return "?" + urlencode(params, quote_via=quote) if params else ""


@functools.lru_cache(maxsize=64)
def _timeout(timeout: float | tuple[float, float] | None) -> urllib3.Timeout | None:
    """A number is the whole request's limit, a pair (connect, read); none or 0, no limit (as
    the generated client reads `_request_timeout`)."""
    if not timeout:
        return None
    if isinstance(timeout, tuple):
        return urllib3.Timeout(connect=timeout[0], read=timeout[1])
    return urllib3.Timeout(total=timeout)


def encode_body(body: Any, content_type: str | None) -> bytes:
    """The body's bytes as the generated client sends them: a JSON content type is always the
    body as JSON; any other (an apply patch's YAML) takes a body given already serialised as it
    is, and a structure as JSON (JSON is YAML)."""
    if isinstance(body, (str, bytes)) and not _is_json(content_type):
        return body.encode() if isinstance(body, str) else body
    return json.dumps(body).encode()


def _is_json(content_type: str | None) -> bool:
    if not content_type:
        return True
    kind = content_type.split(";")[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


def _raw(
    api: client.ApiClient,
    method: str,
    path: str,
    query: Mapping[str, Any] | None,
    body: Any,
    content_type: str | None,
    timeout: float | tuple[float, float] | None,
) -> RESTResponse:
    """One request over the client's own urllib3 pool (its TLS material, client certificate,
    proxy and pool size), with its credentials; without its generated request path, which
    serialises every parameter and runs the credentials hook for every request."""
    try:
        prepared = _prepare(api)
        headers = dict(prepared.headers)
        data = None
        if content_type is not None:
            headers["Content-Type"] = content_type
        if body is not None:
            data = encode_body(body, content_type)
        answer = api.rest_client.pool_manager.urlopen(
            method, prepared.base + path + query_string(query), body=data, headers=headers,
            timeout=_timeout(timeout), preload_content=False)
    except Exception as error:  # connection refused, reset, timeout: no HTTP answer at all
        raise ApiError(0, type(error).__name__, str(error)) from error
    if answer.status == 401:
        _forget_credentials(api)
    return RESTResponse(answer)


def _error(response: RESTResponse) -> ApiError:
    data = response.read() or b""
    try:
        status = json.loads(data)
    except ValueError:
        status = {}
    if not isinstance(status, dict):
        status = {}
    return ApiError(
        int(response.status),
        str(status.get("reason") or response.reason or ""),
        str(status.get("message") or data[:300].decode(errors="replace")),
        status,
    )


def request(
    api: client.ApiClient,
    method: str,
    path: str,
    *,
    query: Mapping[str, Any] | None = None,
    body: Any = None,
    content_type: str | None = None,
    timeout: float | tuple[float, float] | None = DEFAULT_TIMEOUT,
) -> dict[str, Any]:
    """One request; the decoded JSON answer, or ApiError."""
    if body is not None and content_type is None:
        content_type = JSON
    response = _raw(api, method, path, query, body, content_type, timeout)
    if not 200 <= response.status <= 299:
        raise _error(response)
    data = response.read()
    decoded = json.loads(data) if data else {}
    return decoded if isinstance(decoded, dict) else {"value": decoded}


def stream(
    api: client.ApiClient,
    path: str,
    *,
    query: Mapping[str, Any],
    timeout: tuple[float, float],
) -> RESTResponse:
    """A streaming GET (a watch); the caller reads `.response` and must close it."""
    response = _raw(api, "GET", path, query, None, None, timeout)
    if not 200 <= response.status <= 299:
        error = _error(response)
        response.response.release_conn()
        raise error
    return response


def merge_patch(
    api: client.ApiClient,
    path: str,
    body: Mapping[str, Any],
    *,
    timeout: float | tuple[float, float] | None = DEFAULT_TIMEOUT,
    field_manager: str | None = None,
) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386): only the fields in `body` change."""
    query = {"fieldManager": field_manager} if field_manager else None
    return request(api, "PATCH", path, query=query, body=dict(body), content_type=MERGE_PATCH,
                   timeout=timeout)


LIST_PAGE: Final = 500
"""Objects per page of `list_objects`."""


def list_objects(api: client.ApiClient, path: str) -> Iterator[dict[str, Any]]:
    """Every object at `path`, page by page, each with the list's apiVersion and kind (a list's
    items carry neither); none when the server does not serve the kind."""
    token: str | None = None
    while True:
        try:
            page = request(api, "GET", path, query={"limit": LIST_PAGE, "continue": token})
        except ApiError as error:
            if error.not_found:
                return
            raise
        meta = page.get("metadata") or {}
        api_version, kind = page.get("apiVersion"), str(page.get("kind", "")).removesuffix("List")
        for item in page.get("items") or []:
            yield {"apiVersion": api_version, "kind": kind, **item}
        token = meta.get("continue") or None
        if token is None:
            return


# --- discovery ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResolvedKind:
    """A kind the API server serves: the version to use, its plural, whether it is namespaced."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool


def resolve_kind(api: client.ApiClient, group: str, kind: str) -> ResolvedKind | None:
    """The served resource for group + kind (preferred version first, then any), or None.

    Consumers of a kind resolve by group and kind, never by a pinned version (provider
    contract), so a CRD that adds or moves versions keeps working. 404 means not installed;
    other errors propagate (the caller retries).
    """
    try:
        if group == "":
            versions = ["v1"]
        else:
            info = request(api, "GET", f"/apis/{group}")
            preferred = (info.get("preferredVersion") or {}).get("version")
            listed = [v.get("version") for v in info.get("versions") or [] if v.get("version")]
            versions = ([preferred] if preferred else []) + [v for v in listed if v != preferred]
    except ApiError as error:
        if error.not_found:
            return None
        raise
    for version in versions:
        base = "/api/v1" if group == "" else f"/apis/{group}/{version}"
        try:
            resources = request(api, "GET", base).get("resources") or []
        except ApiError as error:
            if error.not_found:
                continue
            raise
        for resource in resources:
            if resource.get("kind") == kind and "/" not in str(resource.get("name", "")):
                return ResolvedKind(group, str(version), kind, str(resource["name"]),
                                    bool(resource.get("namespaced")))
    return None


def object_key(obj: Mapping[str, Any]) -> str:
    """`namespace/name` (or `name` for cluster-scoped objects), client-go's cache key."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    name = str(meta.get("name", ""))
    return f"{namespace}/{name}" if namespace else name


def split_key(key: str) -> tuple[str | None, str]:
    namespace, slash, name = key.partition("/")
    return (namespace, name) if slash else (None, key)
