"""Child processes that end with the process that started them, even when it is killed.

Linux's `PR_SET_PDEATHSIG` has the kernel signal a child when its parent dies, which no cleanup
code can do for a parent killed with SIGKILL. Three of its rules decide where it must be set:

- the "parent" is the *thread* that forked the child: a child started from a worker thread is
  signalled when that thread ends, however long the process lives;
- it is cleared when the child changes its user or group ID (a launcher that drops privileges
  must set it again after the drop, and check the parent did not die in between);
- it is not inherited across fork: a process's own children (gunicorn's workers) need their own.
"""

from __future__ import annotations

import ctypes
import signal
from typing import Final

PR_SET_PDEATHSIG: Final = 1


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """Ask the kernel to send `signum` to this process when its parent thread ends (for
    `preexec_fn`, or right after a fork)."""
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    if prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
