"""msgspec imported without typing_extensions, so that a short command does not pay for it.

msgspec imports `typing_extensions` when it is installed (other dependencies install it) only to
take its `get_type_hints`, `Required` and `NotRequired`, and falls back to `typing`'s when the
import fails; on Python 3.11 and later `typing` has all three. `typing_extensions` in turn
imports `inspect` (with `ast`, `dis`, `tokenize`): about 20 ms of every `fivespot check` of one
object (0.24 s), which uses none of it. The import is refused for msgspec's first import only;
everything imported afterwards gets `typing_extensions` as usual.
"""

from __future__ import annotations

import sys

_NAME = "typing_extensions"


def import_msgspec() -> None:
    """Import msgspec (if nothing has yet) with `typing`'s helpers instead of typing_extensions'."""
    if "msgspec" in sys.modules or _NAME in sys.modules:
        return
    sys.modules[_NAME] = None  # type: ignore[assignment]  # `import` raises ImportError
    try:
        import msgspec  # noqa: F401
    finally:
        del sys.modules[_NAME]
