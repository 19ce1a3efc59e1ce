"""Fixtures for tests against the real control plane: one per session, a fresh namespace per test.

There is no controller-manager, so namespaces are never garbage-collected: each test gets its own
uniquely named namespace and nothing waits for deletion.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from fivespot.devcluster.build import cache_root, cached_binaries, ensure_binaries
from fivespot.devcluster.clients import admin_client, client_as_service_account
from fivespot.devcluster.controlplane import ControlPlane
from tests.image_scripts import build_script
from tests.integration import leaks


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests with the real GitOps engines (marker `engines`) and the real peers (`peers`)
    run last: they are the slowest, so every other test reports first."""
    items.sort(key=lambda item: any(item.get_closest_marker(m) is not None for m in ("engines", "peers")))


def _snapshot() -> set[tuple[int, int]]:
    return {(p.pid, p.start) for p in leaks.descendants(os.getpid())}


def _fail_on(survivors: list[leaks.Proc], where: str) -> None:
    if survivors:
        leaks.kill(survivors)
        pytest.fail(f"{len(survivors)} process(es) started {where} outlived it:\n"
                    + "\n".join(f"  {proc}" for proc in survivors), pytrace=False)


@pytest.fixture(scope="session", autouse=True)
def no_process_outlives_the_run() -> Iterator[None]:
    """Nothing the integration tests start (control planes included) survives the run. Set up
    before, so torn down after, every other session fixture."""
    leaks.become_subreaper()
    before = _snapshot()
    yield
    _fail_on(leaks.survivors(before), "by the integration tests")
    leaks.reap_zombies(before)


@pytest.fixture(scope="module", autouse=True)
def no_process_outlives_its_module(no_process_outlives_the_run: None) -> Iterator[None]:
    """Nothing a test module starts survives its module, except the session's control plane
    (whose binaries live in the cache; the session check above covers it)."""
    before = _snapshot()
    yield
    shared = (str(cache_root() / "controlplane"),)
    _fail_on(leaks.survivors(before, ignore=shared), "by this module")
    leaks.reap_zombies(before, ignore=shared)


@contextmanager
def own_control_plane(**options: Any) -> Iterator[ControlPlane]:
    """A control plane for one module alone (`ControlPlane` options: bind address, flags,
    controllers), for tests that change cluster-wide objects others rely on."""
    plane = ControlPlane(cached_binaries() or ensure_binaries(), owned=True, **options)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="module")
def module_plane() -> Iterator[ControlPlane]:
    """A control plane of the module's own, for a module that restarts, pauses or reconfigures
    it, or tightens cluster-wide policies others rely on."""
    with own_control_plane() as plane:
        yield plane


@pytest.fixture(scope="module")
def module_admin(module_plane: ControlPlane) -> Iterator[client.ApiClient]:
    api = admin_client(module_plane.kubeconfig)
    yield api
    api.close()


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


ROOT = Path(__file__).resolve().parents[2]


def image_build_dir() -> Path:
    """Where the tests build the image: in the cache, one folder per checkout, so checkouts at
    different revisions (each a different image) do not rebuild over each other's."""
    import hashlib

    cache = Path(os.environ.get("FIVESPOT_CACHE_DIR", Path.home() / ".cache" / "fivespot"))
    return cache / "image" / f"test-build-{hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]}"


@pytest.fixture(scope="session")
def built_image() -> dict[str, Any]:
    """`image/build.py build --reuse` into the cache; the image's layout, tag and reference, its
    docker archive, and the SBOM and provenance written beside it."""
    out = image_build_dir()
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(ROOT / "image" / "build.py"), "build", "--out",
                           str(out), "--reuse"], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"the image build failed:\n{done.stderr[-4000:]}"
    print(f"image build: {time.monotonic() - started:.1f}s\n{done.stdout}")
    fields = dict(line.split(" ", 1) for line in (out / "inputs.txt").read_text().splitlines())
    reference = fields["image"]
    script = build_script()
    return {"layout": out / "oci", "tag": reference.rsplit(":", 1)[1], "reference": reference,
            "archive": next(out.glob("*.docker.tar")), "digest": fields["digest"],
            "sbom": out / script.SBOM, "provenance": out / script.PROVENANCE}
