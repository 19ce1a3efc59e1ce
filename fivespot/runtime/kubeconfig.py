"""What fivespot accepts from a kubeconfig it does not trust: CAPI's `<cluster>-kubeconfig` Secret.

Whoever can write that Secret chooses its content, and a kubeconfig handed to the `kubernetes`
client is a program: `users[].user.exec` and an `auth-provider`'s `cmd-path` run commands in the
reading process, `tokenFile` reads any local file and sends it as a Bearer token to whatever
`server` says, file-path fields read local files, `proxy-url` and `insecure-skip-tls-verify`
choose where the connection really goes. So the machine controller never gives the client a
kubeconfig: `parse` reads one into `ClusterAccess` — the current context's `https://` server, its
inline CA, and the user's inline client certificate and key and/or token — and refuses everything
else, naming each field's path and never its value
(docs/design/decisions/0021-untrusted-kubeconfigs.md).

Pure: no file, no network, no `kubernetes` import; `fivespot.runtime.kube.client_for` builds the client.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

import yaml

CLUSTER_FIELDS: Final = frozenset({"server", "certificate-authority-data"})
USER_FIELDS: Final = frozenset({"client-certificate-data", "client-key-data", "token"})
CONTEXT_FIELDS: Final = frozenset({"cluster", "user", "namespace"})
"""The allowlists: any other field of the entries the current context uses is refused. (The
context's `namespace` is harmless: every request names its own path.)"""

_INLINE: Final = ("; put the credentials inline (client-certificate-data and client-key-data, "
                  "or token)")
WHY: Final[Mapping[str, str]] = {
    "exec": "an exec credential plugin runs a command in the controller" + _INLINE,
    "auth-provider": "an auth provider runs a command (cmd-path) or calls an identity provider "
                     "from the controller" + _INLINE,
    "tokenFile": "reads a file in the controller and sends it as a Bearer token" + _INLINE,
    "token-file": "reads a file in the controller and sends it as a Bearer token" + _INLINE,
    "client-certificate": "a file path in the controller; put the certificate inline "
                          "(client-certificate-data)",
    "client-key": "a file path in the controller; put the key inline (client-key-data)",
    "certificate-authority": "a file path in the controller; put the CA inline "
                             "(certificate-authority-data)",
    "username": "basic authentication (removed from Kubernetes in 1.19) is not accepted",
    "password": "basic authentication (removed from Kubernetes in 1.19) is not accepted",
    "proxy-url": "sends the connection through a proxy the Secret chooses",
    "insecure-skip-tls-verify": "turns off the check of the server's certificate; pin the "
                                "cluster's CA (certificate-authority-data) instead",
    "tls-server-name": "checks the server's certificate against another name than the server's",
}
"""Why a known field is refused; an unknown one is refused as not on the allowlist."""

MAX_LISTED: Final = 8
"""Problems named in one refusal; the rest are counted (a Secret could hold thousands of keys)."""
_FIELD_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,62}")
_TOKEN: Final = re.compile(r"[\x21-\x7e]+")
_PEM_CERTIFICATE: Final = b"-----BEGIN CERTIFICATE-----"
_PEM_KEY: Final = re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----")


@dataclass(frozen=True)
class Problem:
    """One refused field: its path in the kubeconfig (`users[0].user.exec`) and why."""

    path: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}: {self.why}"


class KubeconfigRefused(ValueError):
    """A kubeconfig fivespot will not use: the message names `source` and each refused field's
    path, never a value from the kubeconfig."""

    def __init__(self, source: str, problems: tuple[Problem, ...]) -> None:
        self.source = source
        self.problems = problems
        listed = "; ".join(str(p) for p in problems[:MAX_LISTED])
        more = f"; and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
        super().__init__(f"{source}: the kubeconfig is refused: {listed}{more}")

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(p.path for p in self.problems)


@dataclass(frozen=True)
class ClusterAccess:
    """Everything the workload-cluster client is built from; the secrets stay out of `repr`."""

    server: str
    ca_pem: bytes = field(repr=False)
    client_certificate_pem: bytes | None = field(default=None, repr=False)
    client_key_pem: bytes | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    cluster_path: str = "clusters[0].cluster"
    user_path: str = "users[0].user"
    """Where the cluster and the user are in the kubeconfig, for a refusal found later (a CA or a
    key that does not load)."""


def parse(data: bytes, source: str) -> ClusterAccess:
    """The current context's cluster and user in `data`, or KubeconfigRefused naming every field
    that is refused (`source` says where the kubeconfig came from, as in `Secret ns/name`).

    Only the entries the current context names are read; other clusters, users and contexts are
    never used, so they are not judged."""
    raw = _load(data, source)
    problems: list[Problem] = []
    context = _selected(raw, "contexts", "context", raw.get("current-context"), "current-context",
                        problems)
    if context is None:
        raise KubeconfigRefused(source, tuple(problems))
    index, entry = context
    at = f"contexts[{index}].context"
    problems += _unknown(entry, CONTEXT_FIELDS, at)
    cluster = _selected(raw, "clusters", "cluster", entry.get("cluster"), f"{at}.cluster", problems)
    user = _selected(raw, "users", "user", entry.get("user"), f"{at}.user", problems)
    server = ca = None
    if cluster is not None:
        server, ca = _cluster(cluster[1], f"clusters[{cluster[0]}].cluster", problems)
    credentials = _user(user[1], f"users[{user[0]}].user", problems) if user is not None else None
    if problems or server is None or ca is None or credentials is None:
        raise KubeconfigRefused(source, tuple(problems))
    certificate, key, token = credentials
    assert cluster is not None and user is not None
    return ClusterAccess(server=server, ca_pem=ca, client_certificate_pem=certificate,
                         client_key_pem=key, token=token,
                         cluster_path=f"clusters[{cluster[0]}].cluster",
                         user_path=f"users[{user[0]}].user")


def _load(data: bytes, source: str) -> Mapping[str, Any]:
    """The YAML document. PyYAML's messages quote the offending text, which here may be a key or a
    token, so a YAML error is reported by its line and column alone."""
    try:
        raw = yaml.safe_load(data)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise KubeconfigRefused(source, (Problem(
            "(document)", f"not valid YAML{where} (the text is not repeated here: it may hold "
                          "credentials)"),)) from None
    except (yaml.YAMLError, ValueError, RecursionError):
        raise KubeconfigRefused(source, (Problem(
            "(document)", "not valid YAML, or not UTF-8 (the text is not repeated here: it may "
                          "hold credentials)"),)) from None
    if not isinstance(raw, Mapping):
        raise KubeconfigRefused(source, (Problem("(document)", "not a kubeconfig (a YAML mapping "
                                                               "with clusters, users, contexts)"),))
    return raw


def _selected(raw: Mapping[str, Any], section: str, inner: str, name: object, named_by: str,
              problems: list[Problem]) -> tuple[int, Mapping[str, Any]] | None:
    """The one entry of `section` whose name is `name` (what `named_by` says), as (index, its
    `inner` mapping); None, with the problem recorded, when there is not exactly one."""
    if not isinstance(name, str) or not name:
        problems.append(Problem(named_by, "missing: it must name an entry of " + section))
        return None
    entries = raw.get(section)
    if not isinstance(entries, list):
        problems.append(Problem(section, "missing, or not a list"))
        return None
    found = [i for i, e in enumerate(entries) if isinstance(e, Mapping) and e.get("name") == name]
    if not found:
        problems.append(Problem(named_by, f"names no entry of {section}"))
        return None
    if len(found) > 1:
        problems.append(Problem(f"{section}[{found[1]}]", f"has the same name as {section}"
                                                          f"[{found[0]}], which {named_by} names"))
        return None
    value = entries[found[0]].get(inner)
    if not isinstance(value, Mapping):
        problems.append(Problem(f"{section}[{found[0]}].{inner}", "missing, or not a mapping"))
        return None
    return found[0], value


def _unknown(entry: Mapping[Any, Any], allowed: frozenset[str], at: str) -> list[Problem]:
    """A problem for each field of `entry` not in `allowed`. A field's name is printed only when
    it looks like one: a key of the Secret is its content too."""
    problems = []
    for key in entry:
        if key in allowed:
            continue
        named = isinstance(key, str) and _FIELD_NAME.fullmatch(key) is not None
        path = f"{at}.{key}" if named else f"{at}.(a field whose name is not shown)"
        why = WHY.get(key) if named else None
        problems.append(Problem(path, why or "not a field fivespot accepts (only "
                                             f"{', '.join(sorted(allowed))})"))
    return problems


def _cluster(cluster: Mapping[str, Any], at: str,
             problems: list[Problem]) -> tuple[str | None, bytes | None]:
    judged = {k: v for k, v in cluster.items()
              if not (k == "insecure-skip-tls-verify" and v is False)}  # says what absence says
    problems += _unknown(judged, CLUSTER_FIELDS, at)
    server = _server(cluster.get("server"), f"{at}.server", problems)
    ca = cluster.get("certificate-authority-data")
    if ca is None:
        problems.append(Problem(f"{at}.certificate-authority-data",
                                "missing: the cluster's CA must be pinned in the kubeconfig (the "
                                "system's trusted CAs are not used)"))
        return server, None
    return server, _pem(ca, f"{at}.certificate-authority-data", _PEM_CERTIFICATE, "a certificate",
                        problems)


def _server(value: object, at: str, problems: list[Problem]) -> str | None:
    if not isinstance(value, str) or not value:
        problems.append(Problem(at, "missing"))
        return None
    try:
        url = urlsplit(value)
        _ = url.port  # a port that is not a number in range raises ValueError
    except ValueError:
        problems.append(Problem(at, "not a URL"))
        return None
    if url.scheme != "https":
        problems.append(Problem(at, "not an https:// URL"))
    elif not url.hostname or url.username is not None or url.password is not None \
            or url.query or url.fragment or not _TOKEN.fullmatch(value):
        problems.append(Problem(at, "not a plain https://host[:port][/path] URL"))
    else:
        return value.rstrip("/")
    return None


def _user(user: Mapping[str, Any], at: str,
          problems: list[Problem]) -> tuple[bytes | None, bytes | None, str | None] | None:
    before = len(problems)
    problems += _unknown(user, USER_FIELDS, at)
    certificate_data, key_data = user.get("client-certificate-data"), user.get("client-key-data")
    certificate = key = token = None
    if certificate_data is not None:
        certificate = _pem(certificate_data, f"{at}.client-certificate-data", _PEM_CERTIFICATE,
                           "a certificate", problems)
    if key_data is not None:
        key = _pem(key_data, f"{at}.client-key-data", _PEM_KEY, "a private key", problems)
    if (certificate_data is None) != (key_data is None):
        missing = "client-key-data" if key_data is None else "client-certificate-data"
        problems.append(Problem(f"{at}.{missing}", "missing: a client certificate needs its key, "
                                                   "and a key its certificate"))
    raw_token = user.get("token")
    if raw_token is not None:
        if isinstance(raw_token, str) and _TOKEN.fullmatch(raw_token):
            token = raw_token
        else:
            problems.append(Problem(f"{at}.token", "not a bearer token (a non-empty string of "
                                                   "visible ASCII characters)"))
    if len(problems) == before and certificate_data is None and raw_token is None:
        problems.append(Problem(at, "no credentials: client-certificate-data with client-key-data, "
                                    "or token"))
    return (certificate, key, token) if len(problems) == before else None


def _pem(value: object, at: str, marker: bytes | re.Pattern[bytes], what: str,
         problems: list[Problem]) -> bytes | None:
    """The base64-decoded PEM of a `*-data` field, or None with the problem recorded."""
    try:
        decoded = base64.b64decode(value, validate=True) if isinstance(value, str) else None
    except (binascii.Error, ValueError):
        decoded = None
    if not decoded:
        problems.append(Problem(at, "not base64"))
        return None
    found = marker in decoded if isinstance(marker, bytes) else marker.search(decoded) is not None
    if not found:
        problems.append(Problem(at, f"not {what} in PEM"))
        return None
    return decoded
