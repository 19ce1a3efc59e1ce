"""Running the capacity controller against a local control plane, the way a cluster would: the
compiled example installed, the controller as its own ServiceAccount with the compiled RBAC, as
a separate process. Shared by the integration tests, `make demo` and the benchmark, so all three
exercise the same path.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import IO, Any, Final

from fivespot.api.identities import CAPACITY_CONTROLLER
from fivespot.runtime.processes import die_with_parent

ROOT: Final = Path(__file__).resolve().parents[2]
EXAMPLE: Final = ROOT / "examples" / "agent-sandbox"
CONSUMER_CRD: Final = EXAMPLE / "consumer" / "virtualmachinepools.yaml"
INSTALL_NAMESPACE: Final = "5spot-system"


def compile_and_install(
    kubeconfig: Path, out_dir: Path, config_dir: Path = EXAMPLE / "config", *, webhook: bool = False
) -> Path:
    """Compile the example, install it (plus the consumer's CRD); the bundle.json path.

    Without `webhook` the compiled ValidatingWebhookConfiguration is left out of the install
    (OUT_DIR keeps it, as compiled): it points at a Service that only exists in a real cluster,
    and with failurePolicy Fail it would refuse every ScheduledCapacity. It is not installed at
    all rather than installed and deleted again: the API server's admission plugin learns of a
    deletion a moment later, and until then it would refuse writes. Run the webhook locally (and
    keep it) to test admission too.
    """
    from fivespot.compiler.emit.base import WEBHOOK_CONFIG
    from fivespot.compiler.output import write_tree
    from fivespot.compiler.pipeline import compile_repo
    from fivespot.devcluster.kubectl import install

    compiled = compile_repo(config_dir)
    write_tree(compiled.files, out_dir)
    ensure_namespaces(kubeconfig, _tenant_namespaces(out_dir))
    install(kubeconfig, out_dir, [CONSUMER_CRD], skip_layers=() if webhook else (WEBHOOK_CONFIG,))
    if not webhook:
        remove_webhook_configuration(kubeconfig)  # one an earlier install left
    return out_dir / "bundle.json"


def remove_webhook_configuration(kubeconfig: Path) -> None:
    from fivespot.api.identities import WEBHOOK_CONFIGURATION
    from fivespot.devcluster.kubectl import kubectl

    kubectl(kubeconfig, "delete", "validatingwebhookconfiguration", WEBHOOK_CONFIGURATION,
            "--ignore-not-found", "--wait=false")


def compiled_objects(out_dir: Path, skip_layers: Collection[str] = ()) -> list[dict[str, Any]]:
    """Every object a compiled OUT_DIR holds (its kustomizations left out), but those of
    `skip_layers`, in path order."""
    import yaml

    return [document for path in sorted(out_dir.rglob("*.yaml"))
            if path.name != "kustomization.yaml" and path.parts[len(out_dir.parts)] not in skip_layers
            for document in yaml.safe_load_all(path.read_text())
            if isinstance(document, dict) and "kind" in document]


def _tenant_namespaces(out_dir: Path) -> set[str]:
    """Namespaces that compiled tenant objects live in (schedules, the machine controller's Roles
    in the CAPI clusters' namespaces); they must exist first."""
    from fivespot.compiler.emit.base import WORKLOADS

    found: set[str] = set()
    for obj in compiled_objects(out_dir, skip_layers=(WORKLOADS,)):
        meta = obj.get("metadata")
        namespace = meta.get("namespace") if isinstance(meta, dict) else None
        if isinstance(namespace, str) and namespace != INSTALL_NAMESPACE:
            found.add(namespace)
    return found


def ensure_namespaces(kubeconfig: Path, names: set[str]) -> None:
    """Create each namespace unless it exists (409 is fine: other tests share them)."""
    from fivespot.runtime import kube
    from fivespot.devcluster.clients import admin_client

    api = admin_client(kubeconfig)
    try:
        for name in sorted(names):
            try:
                kube.request(api, "POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
            except kube.ApiError as error:
                if not error.conflict:
                    raise
    finally:
        api.close()


def controller_kubeconfig(kubeconfig: Path, out: Path) -> Path:
    """A kubeconfig for 5spot-system/fivespot-capacity-controller (a real token)."""
    from fivespot.devcluster.clients import service_account_kubeconfig

    return service_account_kubeconfig(kubeconfig, INSTALL_NAMESPACE, CAPACITY_CONTROLLER, out)


def start_controller(
    kubeconfig: Path,
    bundle: Path,
    identity: str,
    log_file: Path,
    *,
    partitions: Sequence[str] = (),
    metrics_port: int = 0,
    extra: Sequence[str] = (),
    controller: str = "capacity",
) -> subprocess.Popen[bytes]:
    """`python -m fivespot.controllers CONTROLLER ...` (capacity or machine) as a child process logging
    JSON to `log_file`."""
    argv = [sys.executable, "-m", "fivespot.controllers", controller, "--bundle", str(bundle),
            "--kubeconfig", str(kubeconfig), "--identity", identity,
            "--metrics-port", str(metrics_port), *extra]
    if partitions:
        argv += ["--partitions", ",".join(partitions)]
    log: IO[bytes] = open(log_file, "ab")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env,
                                start_new_session=True, preexec_fn=die_with_parent)
    finally:
        log.close()


def metrics_port_of(log_file: Path, timeout_s: float = 20.0) -> int:
    """The port a controller started with --metrics-port 0 bound (it logs it at start)."""
    import json

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log_file.exists():
            for line in log_file.read_text(errors="replace").splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("msg") == "capacity controller starting":
                    return int(entry["metrics_port"])
        time.sleep(0.1)
    raise TimeoutError(f"no start line in {log_file}")


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode()
