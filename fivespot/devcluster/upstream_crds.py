"""Upstream CRDs of tools fivespot counts as governors but the tests do not run, pinned and cached
outside the repo: KEDA's ScaledObject, so that a ScheduledCapacity on a Deployment a ScaledObject
scales is refused live (webhook, controller) against the real schema, as `fivespot check` refuses
it offline.

KEDA itself is not run: it needs the HPA controller and an external-metrics APIService, and only
its ScaledObject's `scaleTargetRef` matters to the one-governor rule (decision record 0029). The
CRD comes from the module's own source on the Go module proxy (nothing else can be downloaded
here), fetched by the engines' code (`fivespot.devcluster.engines.module_dir`), with its version in
`tools/crds/versions` and its cache folder named after that line, like the engines and the peers.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import IO, Final

from fivespot.devcluster.build import REPO_ROOT, cache_root, exclusive
from fivespot.devcluster.engines import EngineBuildError, fresh_folder, go_env, module_dir, read_pins

PINS: Final = REPO_ROOT / "tools" / "crds" / "versions"
NAMES: Final = ("keda",)
KEDA_SCALEDOBJECT_CRD: Final = "config/crd/bases/keda.sh_scaledobjects.yaml"


def crds_root() -> Path:
    return cache_root() / "crds"


def _keda_crd() -> Path:
    pin = read_pins(PINS, NAMES)["keda"]
    return crds_root() / pin.folder_name / Path(KEDA_SCALEDOBJECT_CRD).name


def ensure_keda_scaledobject_crd(out: IO[str] = sys.stderr) -> Path:
    """KEDA's ScaledObject CRD at the pinned version, fetched into the cache first if missing."""
    target = _keda_crd()
    if target.is_file():
        return target
    pin = read_pins(PINS, NAMES)["keda"]
    crds_root().mkdir(parents=True, exist_ok=True)
    with exclusive(crds_root() / ".lock", out, "the upstream CRDs"):
        if not target.is_file():
            work = fresh_folder(crds_root())
            try:
                source = module_dir(pin, work, go_env(pin.toolchain), out) / KEDA_SCALEDOBJECT_CRD
                if not source.is_file():
                    raise EngineBuildError(f"{pin.module}@{pin.version} has no {KEDA_SCALEDOBJECT_CRD}")
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target.with_suffix(".tmp"))
                target.with_suffix(".tmp").replace(target)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    return target
