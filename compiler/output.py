"""Render compiled objects to bytes and write them, atomically, or compare them (`--check`).

Rendering is deterministic (fixed key order from the emitters, block-style multi-line strings),
so the same repo always gives the same bytes. Writing goes to a temporary folder beside OUT_DIR
that is swapped in only when complete: an error never leaves OUT_DIR half-written.
"""

from __future__ import annotations

import difflib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Mapping

import yaml


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


def write_tree(files: Mapping[str, bytes], out_dir: Path) -> None:
    """Replace OUT_DIR with exactly `files`, all at once."""
    out_dir = out_dir.resolve()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.new-", dir=out_dir.parent))
    try:
        for relative, data in sorted(files.items()):
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        _swap(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _swap(staging: Path, out_dir: Path) -> None:
    if not out_dir.exists():
        os.replace(staging, out_dir)
        return
    retired = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
    os.rmdir(retired)
    os.replace(out_dir, retired)
    try:
        os.replace(staging, out_dir)
    except BaseException:
        os.replace(retired, out_dir)
        raise
    shutil.rmtree(retired, ignore_errors=True)


def read_tree(out_dir: Path) -> dict[str, bytes]:
    if not out_dir.is_dir():
        return {}
    return {p.relative_to(out_dir).as_posix(): p.read_bytes()
            for p in sorted(out_dir.rglob("*")) if p.is_file()}


def diff_tree(files: Mapping[str, bytes], out_dir: Path) -> str:
    """A unified diff from what OUT_DIR holds to what the repo compiles to; empty if current."""
    current = read_tree(out_dir)
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
