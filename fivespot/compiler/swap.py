"""Exchange two folders in one step, so a process killed at any instant leaves one of them whole.

Replacing a folder with two renames (old aside, new in) has an instant between them where the
path holds nothing; a SIGKILL there loses the output. The kernel can swap two paths atomically:
Linux `renameat2(RENAME_EXCHANGE)` (glibc 2.28+; ext4, xfs, btrfs, tmpfs, overlayfs) and macOS
`renamex_np(RENAME_SWAP)`. `exchange` uses them, and falls back to the two renames only where the
platform or file system has neither (reported by `atomic_exchange_available`).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import sys
from pathlib import Path
from typing import Any, Final

_AT_FDCWD: Final = -100
_RENAME_EXCHANGE: Final = 1 << 1   # linux/fs.h
_RENAME_SWAP: Final = 0x00000002   # macOS sys/stdio.h
_UNSUPPORTED: Final = frozenset({errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP})


@functools.cache
def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _native(a: Path, b: Path) -> bool:
    """Swap with the kernel's own call; False if this platform or file system has none."""
    libc = _libc()
    if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):
        result = libc.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b),
                                _RENAME_EXCHANGE)
    elif sys.platform == "darwin" and hasattr(libc, "renamex_np"):
        result = libc.renamex_np(os.fsencode(a), os.fsencode(b), _RENAME_SWAP)
    else:
        return False
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), str(a), None, str(b))


def exchange(a: Path, b: Path, *, aside: Path) -> None:
    """Afterwards `a` holds what `b` held and `b` what `a` held. Both must exist.

    Without an atomic swap, `b` is renamed to `aside` (which must not exist), `a` to `b`, and
    `aside` to `a`: the same end state, with an instant in which `b` is missing."""
    if _native(a, b):
        return
    os.rename(b, aside)
    try:
        os.rename(a, b)
    except BaseException:
        os.rename(aside, b)
        raise
    os.rename(aside, a)


def atomic_exchange_available(folder: Path) -> bool:
    """Whether folders in `folder` can be swapped atomically (tries it on two empty folders)."""
    first, second = folder / ".fivespot-swap-probe-a", folder / ".fivespot-swap-probe-b"
    first.mkdir()
    try:
        second.mkdir()
        try:
            return _native(first, second)
        finally:
            second.rmdir()
    finally:
        first.rmdir()
