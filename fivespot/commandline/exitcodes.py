"""The exit codes of every fivespot command, one registry (docs/reference/exit-codes.md renders it)."""

from __future__ import annotations

from typing import Final

OK: Final = 0
"""Success: compiled, up to date, every object allowed, every fixture passed, a clean stop."""
NEGATIVE: Final = 1
"""The answer asked for is no: `compile --check` found the output stale, `check` denied an
object, `test`/`run-example` had a fixture with another verdict."""
BAD_INPUT: Final = 2
"""The command could not do its job because of what it was given or found: bad arguments, config
diagnostics, a refused `--out`, an unreadable file or bundle, a kubeconfig that does not load,
an OS error on a path (permission, disk full). The message says what to change."""
INTERNAL: Final = 3
"""A fivespot bug: an exception no check anticipated. One line names it; `--debug` shows the trace."""
INTERRUPTED: Final = 130
"""Stopped by Ctrl-C (SIGINT) before it finished; a compile leaves the previous output."""
BROKEN_PIPE: Final = 141
"""Whoever read the output stopped reading (`fivespot check ... | head`), as for any Unix tool."""

ALL: Final = (OK, NEGATIVE, BAD_INPUT, INTERNAL, INTERRUPTED, BROKEN_PIPE)
