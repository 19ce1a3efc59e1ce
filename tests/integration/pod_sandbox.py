"""Run a compiled Deployment's container from the built image, the way the kubelet would.

`podman run` cannot start containers on this machine (its root lacks CAP_SYS_RESOURCE, so crun and
runc both fail at `setrlimit`), and there is no kubelet. This module plays their part, from the
same two inputs they read, and nothing else:

- the **image config** (Entrypoint, Cmd, User, Env, WorkingDir, from the OCI layout) and the
  image's files (`umoci unpack`);
- the **pod template** of the compiled Deployment: `command`/`args` (Kubernetes' rule: `command`
  replaces the Entrypoint, `args` replace the Cmd), `securityContext` (runAsUser/runAsGroup,
  runAsNonRoot refused for UID 0, readOnlyRootFilesystem, no privilege escalation, every
  capability dropped), `env` with the downward-API fields, `volumeMounts` of configMap, secret and
  emptyDir volumes (read from the API server, as the kubelet reads them), and the ServiceAccount
  token the kubelet mounts at /var/run/secrets/kubernetes.io/serviceaccount.

The process runs in its own mount and PID namespaces (it is PID 1, as in a container), chrooted
into the unpacked image with the root filesystem bind-mounted read-only, as the container's UID
and GID with no supplementary groups, no capabilities and `no_new_privs`. It shares the host's
network, since the local API server listens on loopback.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from fivespot.devcluster.clients import service_account_token
from fivespot.runtime.processes import die_with_parent

SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def image_config(layout: Path, tag: str) -> dict[str, Any]:
    """The OCI image config of `tag` in an OCI image layout (what a runtime starts from)."""
    index = json.loads((layout / "index.json").read_text())
    entry = next(m for m in index["manifests"]
                 if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag)
    manifest = _blob(layout, entry["digest"])
    return _blob(layout, manifest["config"]["digest"])


def _blob(layout: Path, digest: str) -> dict[str, Any]:
    algorithm, value = digest.split(":", 1)
    found: dict[str, Any] = json.loads((layout / "blobs" / algorithm / value).read_text())
    return found


def unpack(layout: Path, tag: str, into: Path) -> Path:
    """The image's root filesystem, unpacked by umoci; returns the rootfs folder."""
    subprocess.run(["umoci", "unpack", "--image", f"{layout}:{tag}", str(into)], check=True,
                   capture_output=True)
    return into / "rootfs"


@dataclass(frozen=True)
class Mount:
    source: Path
    target: str
    read_only: bool


@dataclass(frozen=True)
class Tmpfs:
    target: str
    size: str


@dataclass
class ProcessSpec:
    """What the container runtime is asked to start, resolved from the image and the pod."""

    argv: list[str]
    uid: int
    gid: int
    env: dict[str, str]
    cwd: str
    read_only_root: bool
    mounts: list[Mount] = field(default_factory=list)
    tmpfs: list[Tmpfs] = field(default_factory=list)


def argv(config: dict[str, Any], container: dict[str, Any]) -> list[str]:
    """Kubernetes' rule for the process arguments from the image and the container."""
    image = config.get("config", {})
    if "command" in container:
        return [*container["command"], *container.get("args", [])]
    return [*(image.get("Entrypoint") or []), *(container.get("args") or image.get("Cmd") or [])]


def user(config: dict[str, Any], pod: dict[str, Any], container: dict[str, Any]) -> tuple[int, int]:
    image_user = str(config.get("config", {}).get("User") or "0")
    uid_text, _, gid_text = image_user.partition(":")
    context = {**pod.get("securityContext", {}), **container.get("securityContext", {})}
    uid = int(context.get("runAsUser", uid_text))
    gid = int(context.get("runAsGroup", gid_text or 0))
    if context.get("runAsNonRoot") and uid == 0:
        raise RuntimeError("runAsNonRoot is set and the image runs as root: the kubelet refuses it")
    return uid, gid


def resolve_env(config: dict[str, Any], container: dict[str, Any], pod_name: str,
                namespace: str, api_host: str, api_port: int) -> dict[str, str]:
    env = dict(item.split("=", 1) for item in config.get("config", {}).get("Env", []))
    env.update({"HOSTNAME": pod_name, "KUBERNETES_SERVICE_HOST": api_host,
                "KUBERNETES_SERVICE_PORT": str(api_port)})
    fields = {"metadata.name": pod_name, "metadata.namespace": namespace}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            env[item["name"]] = fields[item["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 10**3, "M": 10**6, "G": 10**9}


def quantity_bytes(text: str) -> int:
    """A Kubernetes memory quantity (`64Mi`) in bytes."""
    for suffix, factor in UNITS.items():
        if text.endswith(suffix):
            return int(text.removesuffix(suffix)) * factor
    return int(text)


def _write_files(folder: Path, files: dict[str, bytes], mode: int) -> Path:
    folder.mkdir(parents=True)
    for name, content in files.items():
        (folder / name).write_bytes(content)
        (folder / name).chmod(mode)
    folder.chmod(0o755)
    return folder


def volume_mounts(api: client.ApiClient, namespace: str, pod: dict[str, Any],
                  container: dict[str, Any], scratch: Path, uid: int,
                  gid: int) -> tuple[list[Mount], list[Tmpfs]]:
    """configMap and secret volumes as files read from the API server; emptyDir as tmpfs."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts: list[Mount] = []
    tmpfs: list[Tmpfs] = []
    core = client.CoreV1Api(api)
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        read_only = bool(mount.get("readOnly", False))
        if "emptyDir" in volume:
            limit = volume["emptyDir"].get("sizeLimit", "64Mi")
            tmpfs.append(Tmpfs(mount["mountPath"], str(quantity_bytes(limit))))
        elif "configMap" in volume:
            source = core.read_namespaced_config_map(volume["configMap"]["name"], namespace)
            files = {k: v.encode() for k, v in (source.data or {}).items()}
            mode = volume["configMap"].get("defaultMode", 0o644)
            mounts.append(Mount(_write_files(scratch / mount["name"], files, mode),
                                mount["mountPath"], read_only))
        elif "secret" in volume:
            secret = core.read_namespaced_secret(volume["secret"]["secretName"], namespace)
            files = {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}
            folder = _write_files(scratch / mount["name"], files,
                                  volume["secret"].get("defaultMode", 0o644))
            for path in folder.iterdir():
                os.chown(path, 0, gid)  # fsGroup: readable by the pod's group
            mounts.append(Mount(folder, mount["mountPath"], read_only))
        else:
            raise NotImplementedError(f"volume {mount['name']}: only configMap, secret, emptyDir")
    return mounts, tmpfs


def service_account_mount(api: client.ApiClient, namespace: str, service_account: str,
                          ca_pem: bytes, scratch: Path) -> Mount:
    """What the kubelet projects for `automountServiceAccountToken: true`."""
    token = service_account_token(api, namespace, service_account)
    folder = _write_files(scratch / "serviceaccount",
                          {"token": token.encode(), "ca.crt": ca_pem,
                           "namespace": namespace.encode()}, 0o644)
    return Mount(folder, SA_MOUNT, True)


def process_spec(config: dict[str, Any], deployment: dict[str, Any], api: client.ApiClient,
                 *, pod_name: str, api_host: str, api_port: int, ca_pem: bytes,
                 scratch: Path) -> ProcessSpec:
    """The process a Deployment's pod runs."""
    return pod_process_spec(config, deployment["metadata"]["namespace"],
                            deployment["spec"]["template"]["spec"], api, pod_name=pod_name,
                            api_host=api_host, api_port=api_port, ca_pem=ca_pem, scratch=scratch)


def pod_process_spec(config: dict[str, Any], namespace: str, pod: dict[str, Any],
                     api: client.ApiClient, *, pod_name: str, api_host: str, api_port: int,
                     ca_pem: bytes, scratch: Path) -> ProcessSpec:
    (container,) = pod["containers"]
    uid, gid = user(config, pod, container)
    context = container.get("securityContext", {})
    if context.get("allowPrivilegeEscalation", True) or context.get("capabilities", {}).get("drop") != ["ALL"]:
        raise RuntimeError("the sandbox runs only containers that drop every capability and "
                           "forbid privilege escalation, as the compiled ones do")
    mounts, tmpfs = volume_mounts(api, namespace, pod, container, scratch, uid, gid)
    if pod.get("automountServiceAccountToken", True):
        mounts.append(service_account_mount(api, namespace, pod["serviceAccountName"], ca_pem,
                                            scratch))
    return ProcessSpec(
        argv=argv(config, container), uid=uid, gid=gid,
        env=resolve_env(config, container, pod_name, namespace, api_host, api_port),
        cwd=container.get("workingDir") or config.get("config", {}).get("WorkingDir") or "/",
        read_only_root=bool(context.get("readOnlyRootFilesystem", False)),
        mounts=mounts, tmpfs=tmpfs,
    )


@dataclass(frozen=True)
class PodNetwork:
    """A network namespace of the pod's own: `ip` on a veth whose host end is `gateway`."""

    ip: str
    gateway: str
    host_interface: str


# The launcher runs as PID 1 of the new namespaces, as root, then becomes the container process.
LAUNCHER = textwrap.dedent('''
    import ctypes, json, os, select, subprocess, sys, time
    spec = json.loads(sys.argv[1])
    root = spec["root"]
    lifeline = spec["lifeline"]
    os.close(lifeline["write"])  # now only the runtime (unshare) holds it open

    def mount(*args):
        subprocess.run(["mount", *args], check=True)

    def ip(*args):
        subprocess.run(["ip", *args], check=True)

    if spec["network"]:
        net = spec["network"]
        deadline = time.monotonic() + 30
        while subprocess.run(["ip", "link", "show", "eth0"], capture_output=True).returncode:
            if time.monotonic() > deadline:
                raise SystemExit("the host never gave this pod its interface")
            time.sleep(0.05)
        ip("link", "set", "lo", "up")
        ip("addr", "add", net["ip"] + "/32", "dev", "eth0")
        ip("link", "set", "eth0", "up")
        ip("route", "add", net["gateway"], "dev", "eth0")
        ip("route", "add", "default", "via", net["gateway"], "dev", "eth0")

    mount("--make-rprivate", "/")
    mount("--bind", root, root)
    for m in spec["mounts"]:
        target = root + m["target"]
        os.makedirs(target, exist_ok=True)
        mount("--bind", m["source"], target)
        if m["read_only"]:
            mount("-o", "remount,bind,ro", target)
    for t in spec["tmpfs"]:
        target = root + t["target"]
        os.makedirs(target, exist_ok=True)
        mount("-t", "tmpfs", "-o", "size=" + t["size"] + ",mode=1777,nosuid,nodev", "tmpfs", target)
    os.makedirs(root + "/proc", exist_ok=True)
    mount("-t", "proc", "-o", "nosuid,nodev,noexec", "proc", root + "/proc")
    os.makedirs(root + "/dev", exist_ok=True)
    mount("-t", "tmpfs", "-o", "size=64k,mode=755,nosuid", "tmpfs", root + "/dev")
    for name in ("null", "zero", "full", "random", "urandom"):
        open(root + "/dev/" + name, "w").close()
        mount("--bind", "/dev/" + name, root + "/dev/" + name)
    if spec["read_only_root"]:
        mount("-o", "remount,bind,ro", root)
    os.chroot(root)
    os.chdir(spec["cwd"])
    os.setgroups([])
    os.setgid(spec["gid"])
    os.setuid(spec["uid"])
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    # The change of user cleared the death signal unshare --kill-child set: set it again, so the
    # container (and, as PID 1, its whole namespace) ends with the runtime, then make sure the
    # runtime did not die before that (its end of the lifeline is then closed).
    if libc.prctl(1, 9, 0, 0, 0) != 0:  # PR_SET_PDEATHSIG, SIGKILL
        raise OSError(ctypes.get_errno(), "PR_SET_PDEATHSIG")
    if select.select([lifeline["read"]], [], [], 0)[0]:
        raise SystemExit("the runtime ended while the container started")
    os.close(lifeline["read"])
    os.execve(spec["argv"][0], spec["argv"], spec["env"])
''')


class SandboxedProcess:
    """A running container process; `stop()` sends SIGTERM (as the kubelet does), then SIGKILL.

    It never outlives the thread that started it: unshare dies with that thread
    (PR_SET_PDEATHSIG, whose "parent" is the creating thread), the container with unshare (the
    launcher sets the death signal again after its change of user, which clears it), and every
    process of the container with the container, PID 1 of its namespace. A caller that wants the
    graceful SIGTERM must `stop()` from that same thread before the thread ends.
    """

    def __init__(self, rootfs: Path, spec: ProcessSpec, log: Path,
                 network: PodNetwork | None = None) -> None:
        payload = {"root": str(rootfs), "argv": spec.argv, "uid": spec.uid, "gid": spec.gid,
                   "network": None if network is None else {"ip": network.ip,
                                                            "gateway": network.gateway},
                   "env": spec.env, "cwd": spec.cwd, "read_only_root": spec.read_only_root,
                   "mounts": [{"source": str(m.source), "target": m.target,
                               "read_only": m.read_only} for m in spec.mounts],
                   "tmpfs": [{"target": t.target, "size": t.size} for t in spec.tmpfs]}
        self.log = log
        stream = log.open("ab")
        namespaces = ["--mount", "--pid"] + (["--net"] if network else [])
        read, write = os.pipe()
        payload["lifeline"] = {"read": read, "write": write}
        try:
            self.process = subprocess.Popen(
                ["unshare", *namespaces, "--fork", "--kill-child",
                 sys.executable, "-I", "-c", LAUNCHER, json.dumps(payload)],
                stdout=stream, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=die_with_parent, pass_fds=(read, write))
        finally:
            stream.close()
            os.close(read)
            os.close(write)
        if network is not None:
            self._connect(network)

    def _connect(self, network: PodNetwork) -> None:
        """The host end of the pod's veth: the gateway address, a route to the pod."""
        deadline = time.monotonic() + 30
        while (pid := self.container_pid()) is None:
            if not self.alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the pod's launcher did not start:\n{self.output()}")
            time.sleep(0.02)
        host = network.host_interface
        for command in (["link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", str(pid)],
                        ["addr", "add", f"{network.gateway}/32", "dev", host],
                        ["link", "set", host, "up"],
                        ["route", "add", f"{network.ip}/32", "dev", host]):
            subprocess.run(["ip", *command], check=True, capture_output=True)

    def alive(self) -> bool:
        return self.process.poll() is None

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def container_pid(self) -> int | None:
        """The container's process (PID 1 of its namespace), as the host sees it."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        try:
            found = children.read_text().split()
        except OSError:
            return None
        return int(found[0]) if found else None

    def stop(self, grace_s: float = 15.0) -> int:
        """SIGTERM to the container's process, as the kubelet sends; SIGKILL after the grace."""
        if self.alive() and (pid := self.container_pid()) is not None:
            os.kill(pid, signal.SIGTERM)
            try:
                self.process.wait(grace_s)
            except subprocess.TimeoutExpired:
                pass
        if self.alive():
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)
        try:  # whatever is left of the group once unshare has gone (nothing, normally)
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return self.process.returncode


def scratch_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="fivespot-pod-"))


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
