"""The files a command reads from a folder it is given: the folder is a boundary.

`compile`, `test` and `run-example` read a config folder, `check` its `--policies` and object
folders, `schedule preview` and `audit` theirs, all of it often from a pull request. A symlink
committed there must not make the command read a file of the machine it runs on (a CI runner's
`~/.git-credentials`, its ServiceAccount token, the checkout's `.git/config`) and print part of
it in a diagnostic. So, under the folder given (the root):

- a symlink whose target is outside the root, or hidden in it (a name starting with `.` on the
  way, as `.git/config`), is refused before anything of the target is read: a diagnostic names
  the link, never the target;
- a symlink to a file inside the root is read under the link's name, unless the walk reads that
  file itself (then it would give the same documents twice): so `platform.yaml -> base.yml`
  works, and a link to a file already read changes nothing;
- a symlink to a folder inside the root is not followed: the walk reads that folder where it is;
- hidden files and folders are skipped, as before; files are taken by their name's suffix.

See docs/design/decisions/0022-the-config-repo-is-a-boundary.md. A file named on the command
line is read as given: the user chose it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from fivespot.compiler.diagnostics import Diagnostic, InputError, Location


class Walk(NamedTuple):
    """What a walk found: the files to read (in path order), the symlinks refused."""

    files: list[Path]
    leaving: list[Path]


def walk(root: Path, suffixes: Sequence[str]) -> Walk:
    """Every file under the folder `root` whose name ends with one of `suffixes` (see the
    module's rules), and every symlink refused, each in path order. A folder that cannot be
    listed is skipped."""
    real_root = os.path.realpath(root)
    files: list[Path] = []
    links: list[tuple[Path, str]] = []
    leaving: list[Path] = []
    _walk(root, real_root, tuple(suffixes), files, links, leaving)
    real_files = {os.path.join(real_root, *path.relative_to(root).parts) for path in files}
    files += [link for link, target in links if target not in real_files]
    return Walk(sorted(files), sorted(leaving))


def _walk(folder: Path, real_root: str, suffixes: tuple[str, ...], files: list[Path],
          links: list[tuple[Path, str]], leaving: list[Path]) -> None:
    """`os.scandir`, not `Path.rglob` (a tenth of the time, on a compiled output's ~90 files).
    Only real folders are entered, so a file found at `folder/x` is `real_root/.../x`."""
    try:
        with os.scandir(folder) as entries:
            listed = [(entry.name, entry.is_symlink(), entry.is_dir(follow_symlinks=False),
                       entry.is_file(follow_symlinks=False))
                      for entry in entries if not entry.name.startswith(".")]
    except PermissionError:
        return
    for name, is_link, is_folder, is_file in listed:
        path = folder / name
        wanted = name.endswith(suffixes)
        if is_link:
            target = os.path.realpath(path)
            if not _inside(target, real_root):
                if wanted or os.path.isdir(path):
                    leaving.append(path)
            elif wanted and os.path.isfile(target):
                links.append((path, target))
        elif is_folder:
            _walk(path, real_root, suffixes, files, links, leaving)
        elif wanted and is_file:
            files.append(path)


def _inside(target: str, real_root: str) -> bool:
    """Whether a resolved path is the root or under it, with no hidden name on the way."""
    relative = os.path.relpath(target, real_root)
    if relative == ".":
        return True
    parts = Path(relative).parts
    return not os.path.isabs(relative) and parts[0] != ".." and not any(
        part.startswith(".") for part in parts)


def leaves(shown: str, root: Path) -> Diagnostic:
    """The diagnostic for a symlink `walk` refused, named as the command names files
    (`shown`): what it is and what to do, nothing of where it points."""
    return Diagnostic(Location(shown, 0, 0), "",
                      f"refused, not read: a symlink leading out of {root} (or to a hidden "
                      "file or folder in it); symlinks in the folder given must point inside it")


def yaml_files(root: Path, suffixes: Sequence[str]) -> list[Path]:
    """`walk`'s files under the folder `root`, or `root` itself when it is a file; raises
    InputError naming every symlink refused."""
    if not root.is_dir():
        return [root]
    found = walk(root, suffixes)
    if found.leaving:
        raise InputError([leaves(str(link), root) for link in found.leaving])
    return found.files
