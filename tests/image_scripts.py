"""image/build.py and image/supply_chain.py are scripts beside the image's inputs, not packages of
the project (the Containerfile's build stage runs build.py with nothing installed): the tests load
them by path, once per process, under the names build.py imports them by."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

IMAGE = Path(__file__).resolve().parents[1] / "image"


def load(name: str, file: str) -> ModuleType:
    if (module := sys.modules.get(name)) is not None:
        return module
    spec = importlib.util.spec_from_file_location(name, IMAGE / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def build_script() -> ModuleType:
    """image/build.py."""
    return load("image_build", "build.py")


def supply_chain() -> ModuleType:
    """image/supply_chain.py, as `import supply_chain` in image/build.py finds it."""
    return load("supply_chain", "supply_chain.py")
