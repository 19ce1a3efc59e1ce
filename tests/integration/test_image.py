"""The built image runs the compiled Deployments: same image, entrypoint, args, user and mounts.

The image is built by `image/build.py` exactly as `make image` builds it, into the cache outside
the repo, and rebuilt only when one of its inputs changed (the build's own key). Its containers
are started by tests/integration/pod_sandbox.py from the compiled Deployment and the image config,
the way the kubelet and a container runtime would, against a control plane of this module's own
(the webhook injects its caBundle into the cluster-wide webhook configuration).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

import pytest
import yaml
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from google.protobuf import json_format
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement
from kubernetes import client
from packageurl import PackageURL
from packaging.utils import canonicalize_name

from fivespot.compiler.emit.base import SCHEDULES, WORKLOADS
from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import Compiled, compile_repo
from fivespot.devcluster.clients import admin_client
from fivespot.devcluster.controlplane import ControlPlane
from fivespot.devcluster.kubectl import install, kubectl
from tests.image_scripts import build_script
from tests.integration.conftest import own_control_plane
from tests.integration.pod_sandbox import (
    SandboxedProcess,
    image_config,
    process_spec,
    remove,
    scratch_dir,
    unpack,
)

ROOT = Path(__file__).resolve().parents[2]
# The first test here may build the image (the session fixture `built_image`, up to 30 min
# cold on a loaded machine): the whole item, setup included, gets that long, not 10 min.
pytestmark = pytest.mark.timeout(1800)
EXAMPLE = ROOT / "examples" / "agent-sandbox"
READY_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Compiled, Path]:
    compiled = compile_repo(EXAMPLE / "config")
    out = tmp_path_factory.mktemp("image-out") / "out"
    write_tree(compiled.files, out)
    return compiled, out


def deployments(compiled: Compiled) -> dict[str, dict[str, Any]]:
    return {a.name: a.obj for a in compiled.artifacts
            if a.layer == WORKLOADS and a.kind == "Deployment"}


@pytest.fixture(scope="module")
def rootfs(built_image: dict[str, Any]) -> Iterator[Path]:
    scratch = scratch_dir()
    try:
        yield unpack(built_image["layout"], built_image["tag"], scratch / "bundle")
    finally:
        remove(scratch)


def in_image(rootfs: Path, uid: int, gid: int, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run one command of the image, chrooted, as uid:gid (no mounts: a quick static check)."""
    def drop() -> None:
        os.chroot(rootfs)
        os.chdir("/")
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    return subprocess.run(argv, preexec_fn=drop, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/local/bin:/usr/bin", "HOME": "/home/nonroot"})


# --- what the Deployments ask of the image, and what the image provides ----------------------


def test_every_compiled_deployment_runs_the_built_image_by_its_entrypoint(
    built_image: dict[str, Any], compiled: tuple[Compiled, Path]
) -> None:
    config = image_config(built_image["layout"], built_image["tag"])["config"]
    assert config["Entrypoint"] == ["/usr/local/bin/fivespot"]
    assert not config.get("Cmd")
    for name, deployment in deployments(compiled[0]).items():
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"] == built_image["reference"], name
        assert "command" not in container, f"{name}: the image's entrypoint must run"


def test_the_image_runs_as_the_uid_and_gid_every_deployment_sets(
    built_image: dict[str, Any], compiled: tuple[Compiled, Path]
) -> None:
    config = image_config(built_image["layout"], built_image["tag"])["config"]
    for name, deployment in deployments(compiled[0]).items():
        pod = deployment["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        context = container["securityContext"]
        assert config["User"] == f"{context['runAsUser']}:{context['runAsGroup']}", name
        assert pod["securityContext"]["runAsNonRoot"] and context["readOnlyRootFilesystem"], name


def test_every_deployments_args_are_a_command_the_image_accepts(
    rootfs: Path, compiled: tuple[Compiled, Path]
) -> None:
    for name, deployment in deployments(compiled[0]).items():
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        uid = container["securityContext"]["runAsUser"]
        done = in_image(rootfs, uid, uid, ["/usr/local/bin/fivespot", *container["args"], "--help"])
        assert done.returncode == 0, f"{name}: {container['args']}: {done.stderr}"
        assert "usage: fivespot" in done.stdout


def test_every_mount_path_is_an_empty_folder_of_the_image(
    rootfs: Path, compiled: tuple[Compiled, Path]
) -> None:
    """A read-only root cannot get new mount points, and a mount must hide nothing the image has."""
    for name, deployment in deployments(compiled[0]).items():
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        for mount in container["volumeMounts"]:
            folder = rootfs / mount["mountPath"].lstrip("/")
            assert folder.is_dir() and not folder.is_symlink(), f"{name}: {mount['mountPath']}"
            assert not any(folder.iterdir()), f"{name}: {mount['mountPath']} hides image files"


def test_the_image_has_no_shell_package_manager_or_compiler(rootfs: Path) -> None:
    present = [tool for tool in ("sh", "bash", "dash", "busybox", "apt", "apt-get", "dpkg", "pip",
                                 "pip3", "gcc", "cc", "c++", "ld", "as", "make", "perl")
               if (rootfs / "usr" / "bin" / tool).exists() or (rootfs / "usr" / "sbin" / tool).exists()]
    assert present == []
    site = rootfs / "usr" / "local" / "lib" / "python3.11" / "dist-packages"
    assert not list(site.glob("pip*")) and not list(site.glob("setuptools*"))
    assert not (rootfs / "usr" / "lib" / "python3.11" / "ensurepip").exists()


def test_the_image_records_its_debian_packages_for_scanners(rootfs: Path) -> None:
    records = {p.name for p in (rootfs / "var" / "lib" / "dpkg" / "status.d").iterdir()}
    assert {"libc6", "libssl3", "python3.11-minimal"} <= records
    assert "ID=debian" in (rootfs / "etc" / "os-release").read_text()


def test_the_image_carries_the_oci_annotations(built_image: dict[str, Any]) -> None:
    layout = built_image["layout"]
    labels = image_config(layout, built_image["tag"])["config"]["Labels"]
    index = json.loads((layout / "index.json").read_text())
    digest = index["manifests"][0]["digest"].split(":")[1]
    manifest = json.loads((layout / "blobs" / "sha256" / digest).read_text())
    for key in ("source", "version", "revision", "created"):
        name = f"org.opencontainers.image.{key}"
        assert labels[name] and manifest["annotations"][name] == labels[name], name
    assert labels["org.opencontainers.image.version"] == built_image["tag"]


# --- the SBOM and the provenance `make image` writes beside the image -------------------------


def _sbom(built_image: dict[str, Any]) -> dict[str, Any]:
    text = built_image["sbom"].read_text()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text, all_errors=True) is None
    document: dict[str, Any] = json.loads(text)
    return document


def _sbom_packages(built_image: dict[str, Any], purl_type: str) -> set[tuple[str, str]]:
    found = set()
    for component in _sbom(built_image)["components"]:
        purl = PackageURL.from_string(component["purl"])
        assert [h["alg"] for h in component["hashes"]] == ["SHA-256"], component["name"]
        if purl.type == purl_type:
            found.add((canonicalize_name(purl.name) if purl_type == "pypi" else purl.name,
                       str(purl.version)))
    return found


def test_the_sbom_lists_every_debian_package_the_images_dpkg_status_holds(
    built_image: dict[str, Any], rootfs: Path
) -> None:
    held = set()
    for record in (rootfs / "var" / "lib" / "dpkg" / "status.d").iterdir():
        fields = dict(line.split(": ", 1) for line in record.read_text().splitlines()
                      if ": " in line and not line.startswith(" "))
        held.add((fields["Package"], fields["Version"]))
    assert len(held) == len(build_script().package_names())
    assert _sbom_packages(built_image, "deb") == held


def test_the_sbom_lists_every_wheel_in_site_packages_and_fivespot_itself(
    built_image: dict[str, Any], rootfs: Path
) -> None:
    site = rootfs / build_script().SITE
    installed = set()
    for metadata in site.glob("*.dist-info/METADATA"):
        fields = HeaderParser().parsestr(metadata.read_text())
        installed.add((canonicalize_name(fields["Name"]), fields["Version"]))
    assert ("fivespot", built_image["tag"]) in installed
    assert _sbom_packages(built_image, "pypi") == installed


def test_fivespots_wheel_in_the_image_was_built_by_the_pinned_backend(
    built_image: dict[str, Any], rootfs: Path
) -> None:
    script = build_script()
    (setuptools,) = script.read_pins(script.BUILD_REQUIREMENTS)
    wheel = rootfs / script.SITE / f"fivespot-{built_image['tag']}.dist-info" / "WHEEL"
    assert f"Generator: setuptools ({setuptools.version})" in wheel.read_text()


def test_the_provenance_subject_is_the_built_images_manifest_digest(
    built_image: dict[str, Any]
) -> None:
    text = built_image["provenance"].read_text()
    Statement.copy_from_pb(json_format.Parse(text, statement_pb2.Statement())).validate()
    statement = json.loads(text)
    json_format.ParseDict(statement["predicate"], provenance_pb2.Provenance())
    subjects = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}
    assert subjects == {
        "ghcr.io/finos/fivespot": built_image["digest"].removeprefix("sha256:"),
        built_image["archive"].name: hashlib.sha256(built_image["archive"].read_bytes()).hexdigest()}
    (manifest,) = [m["digest"] for m in json.loads(
        (built_image["layout"] / "index.json").read_text())["manifests"]]
    assert manifest == built_image["digest"]
    byproducts = {b["name"]: b["digest"]["sha256"]
                  for b in statement["predicate"]["runDetails"]["byproducts"]}
    assert byproducts[built_image["sbom"].name] == hashlib.sha256(
        built_image["sbom"].read_bytes()).hexdigest()
    described = _sbom(built_image)["metadata"]["component"]
    assert described["hashes"][0]["content"] == built_image["digest"].removeprefix("sha256:")


def test_every_input_of_the_build_is_in_the_provenance_with_the_digest_the_build_checked(
    built_image: dict[str, Any]
) -> None:
    script = build_script()
    statement = json.loads(built_image["provenance"].read_text())
    resolved = {d["uri"]: d["digest"] for d in
                statement["predicate"]["buildDefinition"]["resolvedDependencies"]}
    for wheel in script.read_pins(script.REQUIREMENTS) + script.read_pins(script.BUILD_REQUIREMENTS):
        assert resolved[PackageURL(type="pypi", name=wheel.name, version=wheel.version)
                        .to_string()] == {"sha256": wheel.sha256}
    inputs = (built_image["layout"].parent / "inputs.txt").read_text().splitlines()
    debs = [line.split() for line in inputs if line.startswith("deb ")]
    assert len(debs) == len(script.package_names())
    found = {(purl.name, purl.version): digest["sha256"] for purl, digest in
             ((PackageURL.from_string(uri), digest) for uri, digest in resolved.items()
              if uri.startswith("pkg:deb/"))}
    assert found == {(name, version): sha.removeprefix("sha256:")
                     for _, name, version, _, sha in debs}


def test_the_docker_archive_is_what_kind_load_and_docker_load_take(built_image: dict[str, Any]) -> None:
    """kind load image-archive imports a `docker save` tar; skopeo reads it as one."""
    inspected = json.loads(subprocess.run(
        ["skopeo", "inspect", f"docker-archive:{built_image['archive']}"],
        capture_output=True, text=True, check=True, timeout=120).stdout)
    config = image_config(built_image["layout"], built_image["tag"])
    assert inspected["Labels"] == config["config"]["Labels"]
    assert len(inspected["Layers"]) == len(config["rootfs"]["diff_ids"])
    import tarfile

    with tarfile.open(built_image["archive"]) as archive:
        manifest = json.load(archive.extractfile("manifest.json"))  # type: ignore[arg-type]
    assert manifest[0]["RepoTags"] == [built_image["reference"]]


# --- the image's processes, started as the Deployments start them ----------------------------


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    with own_control_plane() as own:
        yield own


@pytest.fixture(scope="module")
def installed(plane: ControlPlane, compiled: tuple[Compiled, Path]) -> client.ApiClient:
    result, out = compiled
    tenants = sorted({a.obj["metadata"]["namespace"] for a in result.artifacts if a.layer == SCHEDULES})
    kubectl(plane.kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in tenants]))
    install(plane.kubeconfig, out, [EXAMPLE / "consumer" / "virtualmachinepools.yaml"])
    return admin_client(plane.kubeconfig)


def _wait_ports_free(*ports: int, timeout_s: float = 60.0) -> None:
    """The pods' fixed ports, on the host network here: wait for anyone else to let go."""
    deadline = time.monotonic() + timeout_s
    while True:
        busy = [p for p in ports if _in_use(p)]
        if not busy:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"ports {busy} on 127.0.0.1 stayed in use; the sandbox needs them")
        time.sleep(1)


def _in_use(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return True
    return False


def start(name: str, built_image: dict[str, Any], rootfs: Path, compiled: tuple[Compiled, Path],
          plane: ControlPlane, api: client.ApiClient, scratch: Path) -> SandboxedProcess:
    deployment = deployments(compiled[0])[name]
    host, port = plane.server.removeprefix("https://").rsplit(":", 1)
    assert plane.certs is not None
    spec = process_spec(image_config(built_image["layout"], built_image["tag"]), deployment, api,
                        pod_name=f"{name}-7d9f8-x2x4q", api_host=host, api_port=int(port),
                        ca_pem=plane.certs.serving_ca.read_bytes(), scratch=scratch)
    return SandboxedProcess(rootfs, spec, scratch / "container.log")


def _until(check: Any, what: str, process: SandboxedProcess) -> Any:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if not process.alive():
            pytest.fail(f"the container exited ({process.process.returncode}) before {what}:\n"
                        f"{process.output()[-4000:]}")
        if (value := check()):
            return value
        time.sleep(0.25)
    pytest.fail(f"timed out waiting for {what}:\n{process.output()[-4000:]}")


def _ids(pid: int) -> tuple[str, str]:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return status["Uid"].split()[0], status["Gid"].split()[0]


def _readyz_over_tls(ca_pem: str, server_name: str) -> bool:
    context = ssl.create_default_context(cadata=ca_pem)
    try:
        with socket.create_connection(("127.0.0.1", 8443), timeout=2) as raw:
            with context.wrap_socket(raw, server_hostname=server_name) as tls:
                tls.sendall(f"GET /readyz HTTP/1.1\r\nHost: {server_name}\r\n"
                            "Connection: close\r\n\r\n".encode())
                answer = b""
                while chunk := tls.recv(4096):
                    answer += chunk
    except (OSError, ssl.SSLError):
        return False
    return answer.startswith(b"HTTP/1.1 200")


def test_the_webhook_container_answers_readyz_over_tls_with_the_certificate_it_made(
    built_image: dict[str, Any], rootfs: Path, compiled: tuple[Compiled, Path],
    plane: ControlPlane, installed: client.ApiClient,
) -> None:
    namespace = compiled[0].repo.namespace
    _wait_ports_free(8443, 8080)
    scratch = scratch_dir()
    process = start("fivespot-webhook", built_image, rootfs, compiled, plane, installed, scratch)
    try:
        core = client.CoreV1Api(installed)

        def secret() -> Any:
            """The TLS Secret once the webhook has filled it (the compiled output creates it
            empty: the webhook may not create Secrets)."""
            try:
                found = core.read_namespaced_secret("fivespot-webhook-tls", namespace)
            except client.ApiException:
                return None
            return found if (found.data or {}).get("ca.crt") else None

        import base64

        ca_pem = base64.b64decode(_until(secret, "the webhook's TLS Secret", process).data["ca.crt"]).decode()
        _until(lambda: _readyz_over_tls(ca_pem, f"fivespot-webhook.{namespace}.svc"),
               "/readyz answered 200 over TLS", process)
        assert _ids(process.container_pid() or 0) == ("65532", "65532")
        webhooks = client.AdmissionregistrationV1Api(installed).read_validating_webhook_configuration(
            "fivespot-webhook").webhooks
        assert all(w.client_config.ca_bundle for w in webhooks), "the caBundle was not injected"
        assert process.stop() == 0, process.output()[-4000:]
    finally:
        process.stop()
        remove(scratch)


def test_the_capacity_controller_container_leads_every_partition_and_lets_go_on_sigterm(
    built_image: dict[str, Any], rootfs: Path, compiled: tuple[Compiled, Path],
    plane: ControlPlane, installed: client.ApiClient,
) -> None:
    namespace = compiled[0].repo.namespace
    partitions = [p.name for p in compiled[0].repo.platform.spec.partitions]
    _wait_ports_free(8080)
    scratch = scratch_dir()
    process = start("fivespot-capacity-controller", built_image, rootfs, compiled, plane,
                    installed, scratch)
    pod_name = "fivespot-capacity-controller-7d9f8-x2x4q"
    coordination = client.CoordinationV1Api(installed)

    def holders() -> dict[str, str | None]:
        found = {}
        for partition in partitions:
            try:
                lease = coordination.read_namespaced_lease(
                    f"fivespot-capacity-controller-{partition}", namespace)
                found[partition] = lease.spec.holder_identity
            except client.ApiException:
                found[partition] = None
        return found

    try:
        _until(lambda: all(h == pod_name for h in holders().values()),
               "the container to lead every partition", process)

        def ready() -> bool:
            try:
                with urllib.request.urlopen("http://127.0.0.1:8080/readyz", timeout=2) as answer:
                    return bool(answer.status == 200)
            except OSError:
                return False

        _until(ready, "/readyz on the metrics port", process)
        assert _ids(process.container_pid() or 0) == ("65532", "65532")
        assert process.stop() == 0, process.output()[-4000:]
        assert all(h in (None, "") for h in holders().values()), "the leases were not released"
    finally:
        process.stop()
        remove(scratch)


def test_a_second_build_of_the_same_inputs_has_the_same_digest(
    built_image: dict[str, Any], tmp_path: Path
) -> None:
    """Reproducible: rebuilt from nothing but the caches of downloads, into another folder."""
    done = subprocess.run([sys.executable, str(ROOT / "image" / "build.py"), "build", "--out",
                           str(tmp_path / "again")], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-4000:]
    again = dict(line.split(" ", 1) for line in (tmp_path / "again" / "inputs.txt").read_text().splitlines())
    assert again["digest"] == built_image["digest"]
    archive = next((tmp_path / "again").glob("*.docker.tar"))
    assert archive.read_bytes() == built_image["archive"].read_bytes()
    for document in ("sbom", "provenance"):
        rebuilt = tmp_path / "again" / built_image[document].name
        assert rebuilt.read_bytes() == built_image[document].read_bytes(), document
