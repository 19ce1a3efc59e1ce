"""Write the wrapper Go module that builds one Kubernetes minor's kube-apiserver and
kube-controller-manager: tools/controlplane/kubernetes-MAJOR.MINOR/go.mod (and go.sum).

k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with ./staging paths,
which resolve only inside its own tree. The wrapper requires k8s.io/kubernetes at the release
and replaces every staging module upstream's go.mod names with its published v0.MINOR.PATCH, then
lets `go mod tidy` pick the rest as upstream's requirements say. Upstream's go and godebug lines
are kept, so the server behaves as the released one does.

    python tools/controlplane/pin.py 1.36.3     # (re)writes tools/controlplane/kubernetes-1.36/

Adding a minor also means a row in fivespot/policies/kubeversions.py (the supported range).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEADER = """\
// Wrapper module that builds kube-apiserver and kube-controller-manager {version}, written by
// tools/controlplane/pin.py. k8s.io/kubernetes points its staging modules at ./staging with
// replace lines, which only resolve inside the kubernetes tree; here each one is pinned to its
// published v0.x.y instead.
module fivespot.local/controlplane/kubernetes

"""


def upstream_go_mod(version: str, env: dict[str, str]) -> str:
    """k8s.io/kubernetes's own go.mod at `version`, from the module proxy."""
    found = subprocess.run(
        ["go", "mod", "download", "-json", f"k8s.io/kubernetes@v{version}"],
        env=env, check=True, capture_output=True, text=True,
    ).stdout
    path = re.search(r'"GoMod":\s*"([^"]+)"', found)
    if path is None:
        raise SystemExit(f"go mod download named no go.mod for k8s.io/kubernetes v{version}")
    return Path(path.group(1)).read_text()


def wrapper_go_mod(version: str, upstream: str) -> str:
    minor = ".".join(version.split(".")[1:])
    directives = [line for line in upstream.splitlines()
                  if re.match(r"^(go|godebug|toolchain) ", line)]
    block = re.search(r"^replace \($(.*?)^\)", upstream, re.M | re.S)
    if block is None:
        raise SystemExit("upstream go.mod has no replace block")
    staging = re.findall(r"^\s*(k8s\.io/\S+)\s+=>\s+\./staging/", block.group(1), re.M)
    replaces = "\n".join(f"\t{name} => {name} v0.{minor}" for name in sorted(staging))
    return (HEADER.format(version=f"v{version}") + "\n".join(directives) + "\n\n"
            "tool (\n\tk8s.io/kubernetes/cmd/kube-apiserver\n"
            "\tk8s.io/kubernetes/cmd/kube-controller-manager\n)\n\n"
            f"require k8s.io/kubernetes v{version}\n\nreplace (\n{replaces}\n)\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", help="a k8s.io/kubernetes release, e.g. 1.36.3")
    args = parser.parse_args()
    if not re.fullmatch(r"1\.\d+\.\d+", args.version):
        parser.error(f"version {args.version!r} is not MAJOR.MINOR.PATCH, e.g. 1.36.3")
    env = dict(os.environ, GOWORK="off", GOFLAGS="-mod=mod")
    folder = HERE / ("kubernetes-" + ".".join(args.version.split(".")[:2]))
    folder.mkdir(exist_ok=True)
    (folder / "go.mod").write_text(wrapper_go_mod(args.version, upstream_go_mod(args.version, env)))
    (folder / "go.sum").unlink(missing_ok=True)
    subprocess.run(["go", "mod", "tidy"], cwd=folder, env=env, check=True)
    print(f"wrote {folder / 'go.mod'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
