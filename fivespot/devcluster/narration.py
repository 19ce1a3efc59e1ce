"""What `make demo` prints between its steps, and how it waits for the cluster to get there.

Both of the demo's stories use it: the tenant's handback (`fivespot/devcluster/demo.py`) and the
ScheduledMachine's (`fivespot/devcluster/machine_demo.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from fivespot.runtime import kube


def say(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m", flush=True)


def wait(check: Callable[[], bool], timeout: float, what: str) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except kube.ApiError:
            pass
        time.sleep(0.1)
    print(f"   (still waiting for {what} after {timeout:.0f}s)")
    return False
