"""Apply compiled output to a cluster the way GitOps tools do: server-side apply, layer by layer.

CRDs first (and wait until they are Established), then everything else in layer order, exactly
the order the Argo CD sync waves and Flux dependsOn chain encode: the order
`OUT/waves/kustomization.yaml` lists (`fivespot.compiler.emit.base.LAYERS`).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Callable, Collection, Sequence

import yaml

from fivespot.compiler.emit.base import CRDS, LAYERS
from fivespot.compiler.emit.gitops import WAVES

FIELD_MANAGER = "fivespot-devcluster"


class KubectlFailed(RuntimeError):
    """kubectl exited non-zero; `stderr` is what it said (the API server's refusal, say)."""

    def __init__(self, args: Sequence[str], stderr: str) -> None:
        super().__init__(f"kubectl {' '.join(args)} failed:\n{stderr}")
        self.stderr = stderr


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    binary = shutil.which("kubectl")
    if binary is None:
        raise RuntimeError("kubectl is not on PATH")
    result = subprocess.run([binary, "--kubeconfig", str(kubeconfig), *args], input=stdin,
                            capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise KubectlFailed(args, result.stderr.strip())
    return result.stdout


def apply(kubeconfig: Path, path: Path) -> str:
    """Server-side apply a file, or a folder with a kustomization.yaml (`-k`)."""
    flag = "-k" if (path / "kustomization.yaml").exists() else "-f"
    return kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts",
                   f"--field-manager={FIELD_MANAGER}", flag, str(path))


def wait_established(kubeconfig: Path, crd_names: Sequence[str], timeout_s: int = 60) -> None:
    if crd_names:
        kubectl(kubeconfig, "wait", "--for=condition=Established", f"--timeout={timeout_s}s",
                *[f"crd/{name}" for name in crd_names])


def layers(out_dir: Path) -> list[str]:
    """The layer folders of OUT_DIR in the order its `waves/kustomization.yaml` lists them."""
    waves = out_dir / WAVES / "kustomization.yaml"
    if not waves.is_file():
        return [layer for layer in LAYERS if (out_dir / layer).is_dir()]
    resources = yaml.safe_load(waves.read_text()).get("resources") or []
    return [str(resource).removeprefix("../") for resource in resources]


def install(kubeconfig: Path, out_dir: Path, extra_crds: Sequence[Path] = (),
            after_layer: Callable[[str], None] | None = None,
            skip_layers: Collection[str] = ()) -> None:
    """Install a compiled OUT_DIR (and e.g. a consumer's own CRD) in sync-wave order, leaving
    out `skip_layers` (OUT_DIR itself is not touched); `after_layer(layer)` runs once each layer
    is applied (a test's probe, a health wait)."""
    names = []
    for crd in extra_crds:
        apply(kubeconfig, crd)
        names.append(kubectl(kubeconfig, "get", "-f", str(crd), "-o", "name").strip().split("/")[-1])
    for layer in layers(out_dir):
        folder = out_dir / layer
        if layer in skip_layers or not folder.is_dir():
            continue
        apply(kubeconfig, folder)
        if layer == CRDS:
            names += [p.stem for p in sorted(folder.glob("*.yaml")) if p.name != "kustomization.yaml"]
            wait_established(kubeconfig, names)
        if after_layer is not None:
            after_layer(layer)
