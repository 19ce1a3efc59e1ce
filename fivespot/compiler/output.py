"""Render compiled objects to bytes and write them, atomically, or compare them (`--check`).

Rendering is deterministic (fixed key order from the emitters, block-style multi-line strings),
so the same repo always gives the same bytes. Writing goes only where `fivespot.compiler.ownership` allows,
into a staging folder beside OUT_DIR (modes from the umask) that is swapped with OUT_DIR in one
atomic step when complete (`fivespot.compiler.swap`): an error or a SIGKILL at any instant leaves the old
output or the new one, whole, and what a killed compile left beside it is removed by the next.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, Mapping

import yaml

from fivespot.compiler.ownership import (
    MANIFEST,
    State,
    Target,
    check_target,
    is_owned_output,
    manifest_bytes,
)
from fivespot.compiler.swap import exchange

_LEFTOVER_PREFIX: Final = ".{name}.fivespot-"


# libyaml's emitter is ~30x faster than PyYAML's pure-Python one and emits the same bytes.
_BaseDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_BaseDumper):  # type: ignore[valid-type,misc]
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _represent_str)


def to_yaml(obj: Any) -> str:
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=100)


def with_manifest(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """The whole output folder: the compiled files and the manifest that marks them as fivespot's."""
    return {**files, MANIFEST: manifest_bytes(files)}


def write_tree(files: Mapping[str, bytes], out_dir: Path, *, config_dir: Path | None = None) -> None:
    """Replace OUT_DIR with exactly `files` (and their manifest), all at once.

    Raises OutputRefused, before writing anything, when OUT_DIR is not fivespot's to replace."""
    def checked() -> Target:
        return check_target(out_dir, config_dir=config_dir)

    first = checked()
    parent, name = first.path.parent, first.path.name
    parent.mkdir(parents=True, exist_ok=True)
    with _locked(parent):
        target = checked()  # again: another compile may have written it meanwhile
        _remove_leftovers(parent, name)
        staging = _new_sibling(parent, name)
        try:
            _fill(staging, with_manifest(files))
            if target.state is State.ABSENT:
                os.rename(staging, target.path)
                return
            exchange(staging, target.path, aside=_sibling_name(parent, name))
        except BaseException:
            remove_output(staging)
            raise
        remove_output(staging)  # the previous output, swapped out


def _sibling_name(parent: Path, name: str) -> Path:
    return parent / f"{_LEFTOVER_PREFIX.format(name=name)}{secrets.token_hex(4)}"


def _new_sibling(parent: Path, name: str) -> Path:
    # os.mkdir applies the umask (tempfile.mkdtemp would force 0700 on the whole output).
    while True:
        path = _sibling_name(parent, name)
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue


def _fill(folder: Path, tree: Mapping[str, bytes]) -> None:
    # The manifest goes first, so a folder left behind by a kill is recognisably fivespot's.
    for relative in sorted(tree, key=lambda r: (r != MANIFEST, r)):
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "xb") as stream:
            stream.write(tree[relative])


def remove_output(folder: Path) -> None:
    """Delete a folder that holds only fivespot's files, its manifest last, so that a kill
    part-way leaves a folder `_remove_leftovers` still recognises as fivespot's."""
    if not folder.exists():
        return
    manifest = folder / MANIFEST
    for current, dirs, names in os.walk(folder, topdown=False):
        here = Path(current)
        for file_name in names:
            if here / file_name != manifest:
                (here / file_name).unlink()
        for dir_name in dirs:
            (here / dir_name).rmdir()
    manifest.unlink(missing_ok=True)
    folder.rmdir()


def _remove_leftovers(parent: Path, name: str) -> None:
    """Delete what an earlier compile into `name` left beside it when it was killed: a staging
    folder or the previous output after the swap, each fivespot's by its manifest."""
    prefix = _LEFTOVER_PREFIX.format(name=name)
    for entry in sorted(parent.iterdir()):
        if entry.name.startswith(prefix) and is_owned_output(entry):
            remove_output(entry)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Hold an advisory lock on `folder` itself, so two compiles next to each other take turns
    (one's leftover cleanup never removes the other's staging folder)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def read_tree(out_dir: Path) -> dict[str, bytes]:
    if not out_dir.is_dir():
        return {}
    return {p.relative_to(out_dir).as_posix(): p.read_bytes()
            for p in sorted(out_dir.rglob("*")) if p.is_file()}


def diff_tree(files: Mapping[str, bytes], out_dir: Path) -> str:
    """A unified diff from what OUT_DIR holds to what the repo compiles to (with the manifest);
    empty if current."""
    current = read_tree(out_dir)
    files = with_manifest(files)
    chunks: list[str] = []
    for relative in sorted(set(current) | set(files)):
        old, new = current.get(relative), files.get(relative)
        if old == new:
            continue
        old_lines = (old or b"").decode(errors="replace").splitlines(keepends=True)
        new_lines = (new or b"").decode(errors="replace").splitlines(keepends=True)
        chunks.extend(difflib.unified_diff(
            old_lines, new_lines,
            fromfile=f"a/{relative}" if old is not None else "/dev/null",
            tofile=f"b/{relative}" if new is not None else "/dev/null"))
    return "".join(line if line.endswith("\n") else line + "\n" for line in chunks)
