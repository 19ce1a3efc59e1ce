"""Kubernetes clients for a local control plane: the admin, and any ServiceAccount.

Acting as a ServiceAccount uses a real token from the TokenRequest API, so every permission a
test asserts is decided by the API server's own RBAC authorizer, not by anything of ours.
"""

from __future__ import annotations

import base64
import tempfile
from pathlib import Path

import yaml
from kubernetes import client, config
from kubernetes.client import ApiException


def admin_client(kubeconfig: Path) -> client.ApiClient:
    api: client.ApiClient = config.new_client_from_config(config_file=str(kubeconfig))
    return api


def _server_and_ca(kubeconfig: Path) -> tuple[str, Path]:
    raw = yaml.safe_load(kubeconfig.read_text())
    cluster = raw["clusters"][0]["cluster"]
    ca_file = kubeconfig.parent / "serving-ca.pem"
    if not ca_file.exists():
        with tempfile.NamedTemporaryFile("wb", dir=kubeconfig.parent, delete=False) as tmp:
            tmp.write(base64.b64decode(cluster["certificate-authority-data"]))
        Path(tmp.name).replace(ca_file)
    return str(cluster["server"]), ca_file


def ensure_service_account(admin: client.ApiClient, namespace: str, name: str) -> None:
    core = client.CoreV1Api(admin)
    try:
        core.create_namespaced_service_account(
            namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name))
        )
    except ApiException as error:
        if error.status != 409:
            raise


def service_account_token(
    admin: client.ApiClient, namespace: str, name: str, expiration_seconds: int = 3600
) -> str:
    """A token for the ServiceAccount, minted by the API server's TokenRequest endpoint."""
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=expiration_seconds)
    )
    response = client.CoreV1Api(admin).create_namespaced_service_account_token(name, namespace, request)
    return str(response.status.token)


def client_for_token(kubeconfig: Path, token: str) -> client.ApiClient:
    server, ca_file = _server_and_ca(kubeconfig)
    configuration = client.Configuration()
    configuration.host = server
    configuration.ssl_ca_cert = str(ca_file)
    configuration.api_key = {"authorization": token}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    return client.ApiClient(configuration)


def client_as_service_account(
    kubeconfig: Path, namespace: str, name: str, *, create: bool = True
) -> client.ApiClient:
    """A client that authenticates as system:serviceaccount:NAMESPACE:NAME."""
    admin = admin_client(kubeconfig)
    try:
        if create:
            ensure_service_account(admin, namespace, name)
        token = service_account_token(admin, namespace, name)
    finally:
        admin.close()
    return client_for_token(kubeconfig, token)


def service_account_kubeconfig(kubeconfig: Path, namespace: str, name: str, out: Path) -> Path:
    """A kubeconfig file for a ServiceAccount, for processes and `kubectl` run as that identity."""
    admin = admin_client(kubeconfig)
    try:
        ensure_service_account(admin, namespace, name)
        token = service_account_token(admin, namespace, name, expiration_seconds=24 * 3600)
    finally:
        admin.close()
    raw = yaml.safe_load(kubeconfig.read_text())
    raw["users"] = [{"name": name, "user": {"token": token}}]
    raw["contexts"] = [{"name": name, "context": {"cluster": raw["clusters"][0]["name"], "user": name}}]
    raw["current-context"] = name
    tmp = out.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(raw))
    tmp.chmod(0o600)
    tmp.replace(out)
    return out
