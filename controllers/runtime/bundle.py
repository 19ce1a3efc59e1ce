"""Loading the compiled bundle (`bundle.json`, mounted from the `fivespot-bundle` ConfigMap).

The bundle is the controllers' whole configuration: allowlists, partitions, provider kinds and
the install namespace. A process refuses to start on a bundle it does not understand rather than
guess: an unknown version could mean allowlist semantics it does not implement.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

SUPPORTED_VERSIONS: Final = (1,)


class BundleError(ValueError):
    """The bundle file is missing, not JSON, or of an unsupported version."""


def load_bundle(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise BundleError(f"cannot read bundle {path}: {error}") from error
    if not isinstance(raw, dict):
        raise BundleError(f"bundle {path} is not a JSON object")
    version = raw.get("bundleVersion")
    if version not in SUPPORTED_VERSIONS:
        raise BundleError(f"bundle {path} has bundleVersion {version!r}; this build reads "
                          f"{list(SUPPORTED_VERSIONS)}")
    if not isinstance(raw.get("namespace"), str):
        raise BundleError(f"bundle {path} names no install namespace")
    return raw
