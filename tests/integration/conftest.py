"""Fixtures for tests against the real control plane: one per session, a fresh namespace per test.

There is no controller-manager, so namespaces are never garbage-collected: each test gets its own
uniquely named namespace and nothing waits for deletion.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client

from devcluster.build import cached_binaries, ensure_binaries
from devcluster.clients import admin_client, client_as_service_account
from devcluster.controlplane import ControlPlane


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    binaries = cached_binaries() or ensure_binaries()
    plane = ControlPlane(binaries, owned=True)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def kubeconfig(control_plane: ControlPlane) -> Path:
    return control_plane.kubeconfig


@pytest.fixture(scope="session")
def admin(kubeconfig: Path) -> Iterator[client.ApiClient]:
    api = admin_client(kubeconfig)
    yield api
    api.close()


@pytest.fixture
def namespace(admin: client.ApiClient, request: pytest.FixtureRequest) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower())[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(admin).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
    )
    return name


AsServiceAccount = Callable[[str, str], client.ApiClient]


@pytest.fixture
def as_service_account(kubeconfig: Path) -> Iterator[AsServiceAccount]:
    """`as_service_account(namespace, name)`: a client acting as that ServiceAccount."""
    opened: list[client.ApiClient] = []

    def make(namespace: str, name: str) -> client.ApiClient:
        api = client_as_service_account(kubeconfig, namespace, name)
        opened.append(api)
        return api

    yield make
    for api in opened:
        api.close()
