"""fivespot's version: the installed distribution's, in one place.

Looked up only when asked (`fivespot --version`, the compiled image tag): reading the
distribution's metadata costs more than a short command's whole start-up.
"""

from __future__ import annotations

import functools


@functools.cache
def version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("fivespot")
    except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0.0.0"
