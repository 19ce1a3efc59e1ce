"""Which folders `fivespot compile --out` may write, decided before anything is written.

fivespot writes only what it owns. It owns a folder it creates, an empty folder, and a folder that
holds its own earlier output, which it recognises by the manifest it writes there
(`.fivespot-output`: a marker line, then every file of that output) — never by guessing from
file names. Replacing its own output replaces exactly the files that manifest lists; anything
else found there (a file someone added, a symlink, a `.git`) is refused by name, as is every
target that cannot be fivespot's to replace: a file, `/`, the home folder, the current folder,
the config folder, a folder inside it or one that contains it.

`check_target` is the one decision. Its scan reads only the top of a folder without a manifest and
only the listed folders of one with it, so refusing a large foreign folder (`--out /usr`) is quick.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

MANIFEST: Final = ".fivespot-output"
MARKER: Final = "# fivespot output v1"
_PREAMBLE: Final = (
    MARKER,
    "# Written by `fivespot compile`: the files below are its output. The next compile into this",
    "# folder replaces exactly them and refuses to run if the folder holds anything else.",
)
SHOWN: Final = 5
"""How many offending entries a refusal names before it says how many more there are."""


class OutputRefused(Exception):
    """`--out` names something fivespot must not replace; nothing has been written."""

    def __init__(self, out: Path, what: str, remedy: str) -> None:
        self.out, self.what, self.remedy = out, what, remedy
        super().__init__(f"{out}: {what}; nothing was written. {remedy}")


class State(enum.Enum):
    ABSENT = "absent"
    EMPTY = "empty"
    OWNED = "owned"


@dataclass(frozen=True)
class Target:
    """A checked `--out`: the resolved folder and what is there now."""

    path: Path
    state: State


def manifest_bytes(paths: Iterable[str]) -> bytes:
    """The manifest of an output made of `paths` (relative POSIX paths), deterministic."""
    return "\n".join((*_PREAMBLE, *sorted(paths), "")).encode()


def parse_manifest(data: bytes) -> frozenset[str] | None:
    """The paths a manifest lists, or None if `data` is not a fivespot manifest."""
    try:
        lines = data.decode().splitlines()
    except UnicodeDecodeError:
        return None
    if not lines or lines[0] != MARKER:
        return None
    paths = frozenset(line for line in lines if line and not line.startswith("#"))
    return paths if all(_is_plain_relative(p) for p in paths) else None


def _is_plain_relative(path: str) -> bool:
    pure = PurePosixPath(path)
    return not pure.is_absolute() and ".." not in pure.parts and pure.as_posix() == path


def check_target(out: Path, *, config_dir: Path | None = None) -> Target:
    """Decide whether `out` may be replaced by a new output; raise OutputRefused if not.

    The home folder is $HOME's, the current folder the process's."""
    if out.is_symlink() and not out.exists():
        raise OutputRefused(out, f"is a symlink to {os.readlink(out)}, which does not exist",
                            "Point --out at a real folder, or remove the symlink.")
    path = out.resolve()
    home = os.environ.get("HOME")
    _refuse_special(out, path, config_dir, Path(home) if home else None, Path.cwd())
    if not path.exists():
        _refuse_blocked_parent(out, path)
        return Target(path, State.ABSENT)
    if not path.is_dir():
        raise OutputRefused(out, f"is {_kind(path)}, not a folder",
                            "Give --out a folder that does not exist yet (fivespot creates it), "
                            "an empty folder, or fivespot's earlier output.")
    if os.path.ismount(path):
        raise OutputRefused(out, "is a mount point, which cannot be swapped for a new folder",
                            f"Give --out a folder inside it, such as {out / 'deploy'}.")
    return Target(path, _folder_state(out, path))


def _refuse_special(out: Path, path: Path, config_dir: Path | None, home: Path | None,
                    cwd: Path) -> None:
    choose = "Give --out a folder of its own, such as a new folder beside the config folder."
    if path == Path(path.anchor):
        raise OutputRefused(out, "is the root folder", choose)
    if home is not None and path == home.resolve():
        raise OutputRefused(out, "is your home folder", choose)
    cwd = cwd.resolve()
    if path == cwd or path in cwd.parents:
        raise OutputRefused(out, "is the current folder" if path == cwd
                            else f"contains the current folder {cwd}",
                            "fivespot swaps the whole folder, which would leave your shell in a "
                            "deleted one: run from outside it (cd to its parent) or choose "
                            "another --out.")
    if config_dir is None:
        return
    config = config_dir.resolve()
    if path == config:
        raise OutputRefused(out, "is the config folder", choose)
    if path in config.parents:
        raise OutputRefused(out, f"contains the config folder {config_dir}", choose)
    if config in path.parents:
        raise OutputRefused(out, f"is inside the config folder {config_dir}, where the next "
                                 "compile would read the output as config", choose)


def _refuse_blocked_parent(out: Path, path: Path) -> None:
    """An absent `out` is created with its missing parents: the nearest that exists must be a
    folder."""
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OutputRefused(out, f"cannot be created: {parent} is {_kind(parent)}, not a folder",
                            "Give --out a path whose parents are folders.")


def _kind(path: Path) -> str:
    if path.is_file():
        return "a file"
    return "a special file (a device, socket or pipe)"


def _folder_state(out: Path, path: Path) -> State:
    if (path / ".git").exists() or (path / ".git").is_symlink():
        raise OutputRefused(out, "holds .git: it is a git checkout, not fivespot's output",
                            "Give --out a folder inside the checkout instead, such as "
                            f"{out / 'deploy'}.")
    listed = _manifest_of(path)
    if listed is None:
        foreign = list(_entries(path))
        if not foreign:
            return State.EMPTY
        raise OutputRefused(
            out, f"is not fivespot's output (it has no {MANIFEST} manifest) and holds "
                 f"{_names(foreign)}",
            "Give --out a new or empty folder. If this is the output of a fivespot older than "
            "the manifest, delete the folder yourself and compile again.")
    unowned = sorted(unlisted_entries(path, listed))
    if unowned:
        raise OutputRefused(
            out, f"is fivespot's earlier output, but it also holds {_names(unowned)}, which "
                 "fivespot did not write",
            "Move them out of the folder (a compile replaces the whole folder and would delete "
            "them), then compile again.")
    return State.OWNED


def is_owned_output(path: Path) -> bool:
    """True if `path` is a folder holding only what its fivespot manifest lists (or nothing)."""
    if path.is_symlink() or not path.is_dir():
        return False
    listed = _manifest_of(path)
    if listed is None:
        return not any(True for _ in _entries(path))
    return not any(True for _ in unlisted_entries(path, listed))


def _manifest_of(path: Path) -> frozenset[str] | None:
    manifest = path / MANIFEST
    if manifest.is_symlink() or not manifest.is_file():
        return None
    return parse_manifest(manifest.read_bytes())


def unlisted_entries(root: Path, listed: frozenset[str]) -> Iterator[str]:
    """Every entry under `root` (as `a/b`, folders as `a/`) that is neither the manifest, a
    regular file it lists, nor a folder on the way to one; in walk order, lazily."""
    folders = {parent.as_posix() for p in listed for parent in PurePosixPath(p).parents}
    for current, dirs, files in os.walk(root):
        base = PurePosixPath(Path(current).relative_to(root).as_posix())
        for name in sorted(dirs):
            relative = (base / name).as_posix()
            if (Path(current) / name).is_symlink() or relative not in folders:
                dirs.remove(name)
                yield relative + ("" if (Path(current) / name).is_symlink() else "/")
        for name in sorted(files):
            relative = (base / name).as_posix()
            if relative == MANIFEST:
                continue
            entry = Path(current) / name
            if relative not in listed or entry.is_symlink() or not entry.is_file():
                yield relative


def _entries(path: Path) -> Iterator[str]:
    with os.scandir(path) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            yield entry.name + ("/" if entry.is_dir(follow_symlinks=False) else "")


def _names(entries: list[str]) -> str:
    count = f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"
    shown = ", ".join(entries[:SHOWN])
    more = f" and {len(entries) - SHOWN} more" if len(entries) > SHOWN else ""
    return f"{count}: {shown}{more}"
