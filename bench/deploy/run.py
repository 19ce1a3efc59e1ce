"""Benchmark: what deploying fivespot costs a user — the image build and `fivespot install`.

Not a test. Two parts, each timing whole processes, as a user runs them:

- **image**: `image/build.py build` (what `make image` runs) into fresh folders, twice, with the
  download cache warm (a Debian mirror and PyPI are a network away; the first build of a machine
  also downloads ~60 MiB): wall time of each, whether both give the same manifest digest and the
  same docker-archive bytes (reproducibility), the image's size compressed (the layer blobs a
  registry stores) and unpacked (the layers' tars); then `--reuse` on an unchanged tree.
- **install**: a fresh `fivespot init` repo compiled, then `fivespot install` on a local control
  plane whose Deployments really run from the built image (tests/integration/kubelet.py plays the
  node, as in tests/integration/test_install.py), until every Deployment is Available and the
  webhook configuration has its caBundle; then the second, unchanged, run. Each repeat on a new
  control plane.

    .venv/bin/python bench/deploy/run.py [--part image|install|all] [--repeats 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _spread(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.1f} s"
    return (f"median {statistics.median(values):.1f} s (min {min(values):.1f}, max {max(values):.1f}, "
            f"n={len(values)})")


def _build(out: Path, *, reuse: bool = False) -> tuple[float, dict[str, str]]:
    started = time.monotonic()
    subprocess.run([sys.executable, str(ROOT / "image" / "build.py"), "build", "--out", str(out),
                    *(["--reuse"] if reuse else [])], check=True, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    fields = dict(line.split(" ", 1) for line in (out / "inputs.txt").read_text().splitlines())
    return elapsed, fields


def _sizes(out: Path) -> tuple[int, int]:
    """(compressed layer blobs, unpacked layer tars) in bytes."""
    layout = out / "oci"
    index = json.loads((layout / "index.json").read_text())
    digest = index["manifests"][0]["digest"].split(":")[1]
    manifest = json.loads((layout / "blobs" / "sha256" / digest).read_text())
    compressed = sum(int(layer["size"]) for layer in manifest["layers"])
    archive = next(out.glob("*.docker.tar"))
    with tarfile.open(archive) as docker:
        listed = json.load(docker.extractfile("manifest.json"))  # type: ignore[arg-type]
        unpacked = sum(docker.getmember(name).size for name in listed[0]["Layers"])
    return compressed, unpacked


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def image(repeats: int) -> None:
    with tempfile.TemporaryDirectory(prefix="fivespot-bench-image-") as scratch:
        builds = []
        for number in range(max(repeats, 2)):
            out = Path(scratch) / f"build-{number}"
            elapsed, fields = _build(out)
            archive = _sha256(next(out.glob("*.docker.tar")))
            builds.append((elapsed, fields["digest"], archive))
            print(f"full build {number + 1}: {elapsed:.1f} s, digest {fields['digest']}, "
                  f"docker archive sha256:{archive}", flush=True)
        reused = [_build(Path(scratch) / "build-0", reuse=True)[0] for _ in range(repeats)]
        compressed, unpacked = _sizes(Path(scratch) / "build-0")
    same = len({b[1] for b in builds}) == 1 and len({b[2] for b in builds}) == 1
    print(f"\nimage {fields['image']}")
    print(f"  full build (download cache warm): {_spread([b[0] for b in builds])}")
    print(f"  unchanged tree (--reuse):         {_spread(reused)}")
    print(f"  reproducible: {'yes' if same else 'NO'} ({len(builds)} builds, manifest digest "
          f"{builds[0][1]})")
    print(f"  size: {compressed / 2**20:.1f} MiB compressed, {unpacked / 2**20:.1f} MiB unpacked")


def install(repeats: int) -> None:
    from fivespot.compiler.output import write_tree
    from fivespot.compiler.pipeline import compile_repo
    from fivespot.compiler.scaffold import init
    from fivespot.devcluster.build import cached_binaries, ensure_binaries
    from fivespot.devcluster.controlplane import ControlPlane
    from fivespot.runtime import kube
    from tests.integration.kubelet import LocalKubelet
    from tests.integration.pod_sandbox import remove, scratch_dir, unpack
    from tests.integration.test_install import CONTROLLERS

    from tests.integration.conftest import image_build_dir

    out_image = image_build_dir()
    _build(out_image, reuse=True)
    fields = dict(line.split(" ", 1) for line in (out_image / "inputs.txt").read_text().splitlines())
    reference, tag = fields["image"], fields["image"].rsplit(":", 1)[1]
    firsts: list[float] = []
    seconds: list[float] = []
    with tempfile.TemporaryDirectory(prefix="fivespot-bench-install-") as work:
        init(Path(work) / "config")
        out = Path(work) / "out"
        write_tree(compile_repo(Path(work) / "config").files, out)
        scratch = scratch_dir()
        rootfs = unpack(out_image / "oci", tag, scratch / "bundle")
        try:
            for _ in range(repeats):
                plane = ControlPlane(cached_binaries() or ensure_binaries(), owned=True,
                                     bind_address="0.0.0.0",
                                     apiserver_args=["--enable-aggregator-routing=true"],
                                     controllers=CONTROLLERS)
                plane.start()
                api = kube.load_cli_client(plane.kubeconfig)
                assert plane.certs is not None
                node = LocalKubelet(api, reference, out_image / "oci", tag, rootfs,
                                    int(plane.server.rsplit(":", 1)[1]),
                                    plane.certs.serving_ca.read_bytes())
                node.start()
                try:
                    for runs in (firsts, seconds):
                        started = time.monotonic()
                        done = subprocess.run([sys.executable, "-m", "fivespot", "install", str(out),
                                               "--kubeconfig", str(plane.kubeconfig)],
                                              capture_output=True, text=True, cwd=ROOT)
                        runs.append(time.monotonic() - started)
                        if done.returncode != 0:
                            raise SystemExit(done.stdout + done.stderr)
                    print(f"install: first {firsts[-1]:.1f} s, second {seconds[-1]:.1f} s", flush=True)
                finally:
                    node.stop()
                    api.close()
                    plane.stop()
        finally:
            remove(scratch)
    print(f"\nfivespot install of a fresh `fivespot init` repo (4 Deployments, 2 replicas each "
          f"where compiled so, running from {reference}):")
    print(f"  first run, until every Deployment is Available and the caBundle is in: {_spread(firsts)}")
    print(f"  second run (everything unchanged):                                   {_spread(seconds)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("image", "install", "all"), default="all")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    if args.part in ("image", "all"):
        image(args.repeats)
    if args.part in ("install", "all"):
        install(args.repeats)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
