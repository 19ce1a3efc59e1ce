"""What `fivespot check` keeps between runs: the policy objects it read and the CEL it compiled.

A short `check` (one object, in a pre-commit hook or an editor) spends most of its time before
the first object: parsing the compiled CRDs and policies (PyYAML: their descriptions and block
scalars are not for the fast reader) and compiling their CEL (cel-cpp, then decoding each
checked AST in Python). Both depend only on the bytes of the policy files and on the code and
libraries that read and compile them, so the result is kept in one file per policy set, named
by a SHA-256 over exactly that:

- every policy file's path (relative to its `--policies` root) and content, in order;
- the source of the modules whose output is kept (the YAML reader, the CEL engine, this module)
  and the files of the libraries under them (PyYAML, rapidyaml, cel-expr-python, msgspec: the
  programs' checked trees are its Structs), the Python
  version: a changed reader, engine or library is a different key, never a stale entry.

The Checker itself is compiled afresh from the kept objects every run (its compiled schema is
closures); only the CEL programs it asks for are answered from the kept ones. Nothing is kept
for policies that fail to read or compile.

The folder is `check/` in fivespot's cache (`$FIVESPOT_CACHE_DIR`, else
`$XDG_CACHE_HOME/fivespot`, else `~/.cache/fivespot`), created private to the user. The entries are pickles, so one is read
only from a folder and a file the user owns and nobody else may write; an entry that cannot be
read, or was written by other code, is ignored and replaced. A failure to write costs only the
time saved. The newest `MAX_ENTRIES` are kept. `fivespot check --no-cache` neither reads nor
writes it.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import stat
import sys
from collections.abc import Mapping, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Final

from fivespot.commandline import yamlbounds
from fivespot.policies.cel import engine

FORMAT: Final = 1
"""Bump when what an entry holds changes shape."""
MAX_ENTRIES: Final = 32
_CODE: Final = (
    *sorted((Path(engine.__file__).parent).glob("*.py")),
    Path(__file__).with_name("objectyaml.py"),
    Path(__file__).parents[1] / "kubectlyaml.py",
    Path(yamlbounds.__file__),
    Path(__file__),
)
"""The source whose output an entry holds: the CEL engine's package, the YAML reader, this."""
_LIBRARIES: Final = ("yaml", "ryml", "cel_expr_python", "msgspec")


class Entry:
    """One policy set's kept work (a plain class: a dataclass costs a one-object run ~1 ms to
    define)."""

    __slots__ = ("objects", "programs")

    def __init__(self, objects: list[Mapping[str, Any]], programs: list[engine.Program]) -> None:
        self.objects = objects
        self.programs = programs

    def __getstate__(self) -> tuple[list[Mapping[str, Any]], list[engine.Program]]:
        return self.objects, self.programs

    def __setstate__(self, state: tuple[list[Mapping[str, Any]], list[engine.Program]]) -> None:
        self.objects, self.programs = state


def folder() -> Path:
    """`check/` in fivespot's cache (`$FIVESPOT_CACHE_DIR`, else `$XDG_CACHE_HOME/fivespot`, else
    `~/.cache/fivespot`: where the control plane and the image downloads are kept too)."""
    base = os.environ.get("FIVESPOT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "fivespot")
    return Path(base) / "check"


def key(files: Sequence[tuple[str, str]]) -> str:
    """The entry name for policy files given as (name relative to its root, text), in order."""
    digest = hashlib.sha256(f"fivespot-check-cache {FORMAT} {sys.version}\n".encode())
    for path in _CODE:
        digest.update(f"{path.name} {len(source := path.read_bytes())}\n".encode())
        digest.update(source)
    for name in _LIBRARIES:
        digest.update(f"{name} {_library_identity(name)}\n".encode())
    for name, text in files:
        data = text.encode("utf-8", "surrogatepass")
        digest.update(f"{len(name)} {name} {len(data)}\n".encode())
        digest.update(data)
    return digest.hexdigest()


def _library_identity(name: str) -> str:
    """Where a library is installed, and the size and modification time of its files' folder
    entries: an upgrade or a reinstall changes them."""
    spec = find_spec(name)
    if spec is None:
        return "absent"
    places = list(spec.submodule_search_locations or []) or [str(spec.origin)]
    found = []
    for place in places:
        root = Path(place)
        entries = sorted(root.iterdir()) if root.is_dir() else [root]
        for entry in entries:
            if entry.suffix in (".py", ".so", ".pyd"):
                info = entry.stat()
                found.append(f"{entry}:{info.st_size}:{info.st_mtime_ns}")
    return ";".join(found)


def load(name: str) -> Entry | None:
    """The entry `name`, or None when there is none (or none this user can trust or read)."""
    directory = folder()
    try:
        if not _private(os.stat(directory)):
            return None
        descriptor = os.open(directory / name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        with os.fdopen(descriptor, "rb") as handle:
            if not _private(os.fstat(handle.fileno())):
                return None
            found = pickle.load(handle)  # noqa: S301 - a file only this user can write
    except Exception:  # noqa: BLE001 - a torn or foreign entry is a miss, and is replaced
        return None
    if not isinstance(found, Entry):
        return None
    try:
        os.utime(directory / name)  # recently used: kept when older ones are pruned
    except OSError:
        pass
    return found


def save(name: str, entry: Entry) -> None:
    """Keep `entry` as `name` (atomically: a reader sees the whole entry or none)."""
    directory = folder()
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _private(os.stat(directory)):
            return
        data = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
        partial = directory / f".{name}.{os.getpid()}.partial"
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.replace(partial, directory / name)
        _prune(directory)
    except (OSError, pickle.PicklingError, TypeError):
        return


def _private(info: os.stat_result) -> bool:
    """Owned by this user and writable by nobody else."""
    owner = os.getuid() if hasattr(os, "getuid") else info.st_uid
    return info.st_uid == owner and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _prune(directory: Path) -> None:
    entries = [p for p in directory.iterdir() if not p.name.startswith(".")]
    if len(entries) <= MAX_ENTRIES:
        return
    by_age = sorted(entries, key=lambda p: p.stat().st_mtime_ns)
    for stale in by_age[: len(entries) - MAX_ENTRIES]:
        stale.unlink(missing_ok=True)
