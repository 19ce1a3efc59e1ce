"""Helpers for tests of what `fivespot compile --out` leaves on disk: exact snapshots of a folder."""

from __future__ import annotations

import os
import stat
from pathlib import Path

Entry = tuple[str, int, bytes]
"""(kind, permission bits, content): a file's bytes, a symlink's target, nothing for a folder."""


def snapshot(root: Path) -> dict[str, Entry]:
    """Every entry under `root` (and `root` itself as ''), byte for byte, without following links."""
    found: dict[str, Entry] = {"": _entry(root)}
    if root.is_dir() and not root.is_symlink():
        for current, dirs, files in os.walk(root):
            for name in dirs + files:
                path = Path(current) / name
                found[path.relative_to(root).as_posix()] = _entry(path)
    return found


def _entry(path: Path) -> Entry:
    info = path.lstat()
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        return ("link", mode, os.readlink(path).encode())
    if stat.S_ISDIR(info.st_mode):
        return ("dir", mode, b"")
    if stat.S_ISREG(info.st_mode):
        return ("file", mode, path.read_bytes())
    return ("special", mode, b"")


def files_of(root: Path) -> dict[str, bytes]:
    """The regular files under `root`, as `fivespot.compiler.output.with_manifest` gives them."""
    return {relative: content for relative, (kind, _, content) in snapshot(root).items()
            if kind == "file"}


def folders_of(root: Path) -> set[str]:
    return {relative for relative, (kind, _, _) in snapshot(root).items() if kind == "dir"}
