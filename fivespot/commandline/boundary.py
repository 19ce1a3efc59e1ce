"""The error boundary around a command: no traceback reaches a user.

A command handles the errors it expects itself (diagnostics, a refused `--out`, a bundle that
does not load) and returns its exit code. Whatever else escapes is turned here into one line on
stderr, `COMMAND: what failed (where)`, and an exit code from `fivespot.commandline.exitcodes`:

- an OSError (a path that cannot be read or written, a full disk): the path and the system's
  reason, exit 2;
- any other exception, which is a fivespot bug: its type, message and the line of fivespot's code
  it came from, exit 3;
- Ctrl-C: `interrupted`, exit 130; a closed stdout pipe: silence, exit 141.

`--debug` (accepted anywhere on a command line, see `add_debug_flag`) also prints the trace. A
process that logs JSON (the controllers) gets the line as a JSON log record with the trace in its
`exc` field instead. Exceptions that end a thread other than the main one are reported the same way.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final

from fivespot.commandline import exitcodes

SOURCE_ROOT: Final = Path(__file__).resolve().parents[2]
"""The folder holding fivespot's packages: frames from files under it (not in a virtualenv's
site-packages) are fivespot's own code."""
_MAX_MESSAGE: Final = 300


def add_debug_flag(parser: argparse.ArgumentParser) -> None:
    """Add `--debug` to `parser` and every sub-command parser below it, so it may follow any
    command (`fivespot compile CFG --out OUT --debug`) as well as precede it."""
    _add_debug(parser, top=True)


def _add_debug(parser: argparse.ArgumentParser, *, top: bool) -> None:
    if "--debug" not in parser._option_string_actions:
        # Below the top, SUPPRESS: a sub-command's default would overwrite a --debug given earlier.
        parser.add_argument("--debug", action="store_true",
                            default=False if top else argparse.SUPPRESS,
                            help="on an unexpected error, print the full trace")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                _add_debug(child, top=False)


def run(command: str, handler: Callable[[], int], *, debug: bool = False) -> int:
    """`handler()`'s exit code, or the code of whatever it raised, reported in one line."""
    previous_hook, threading.excepthook = threading.excepthook, _thread_hook(command, debug)
    try:
        return handler()
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return exitcodes.INTERRUPTED
    except BrokenPipeError:
        _detach_stdout()
        return exitcodes.BROKEN_PIPE
    except OSError as error:
        report(command, describe_os_error(error), error, debug=debug)
        return exitcodes.BAD_INPUT
    except Exception as error:
        report(command, describe_internal_error(error), error, debug=debug)
        return exitcodes.INTERNAL
    finally:
        threading.excepthook = previous_hook


def describe_os_error(error: OSError) -> str:
    reason = error.strerror or _first_line(error)
    paths = [str(p) for p in (error.filename, error.filename2) if p is not None]
    return f"{' -> '.join(paths)}: {reason}" if paths else reason


def describe_internal_error(error: BaseException) -> str:
    """`internal error: TYPE: message (at FILE:LINE in FUNCTION[; raised in FILE:LINE]) ...`."""
    import traceback  # imported only by a command that fails: no other module of a check needs it

    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if _is_ours(f.filename)]
    where = []
    if ours:
        where.append(f"at {_shown(ours[-1].filename)}:{ours[-1].lineno} in {ours[-1].name}")
    if frames and (not ours or frames[-1] is not ours[-1]):
        where.append(f"raised in {_shown(frames[-1].filename)}:{frames[-1].lineno}")
    message = _first_line(error)
    text = f"internal error: {type(error).__name__}{': ' + message if message else ''}"
    if where:
        text += f" ({'; '.join(where)})"
    return f"{text}. This is a fivespot bug: run again with --debug for the trace and report it"


def report(command: str, what: str, error: BaseException, *, debug: bool) -> None:
    """Say `COMMAND: what` once: as a JSON log record with the trace where the process logs
    JSON, else as a line on stderr (and the trace after it with --debug)."""
    line = f"{command}: {what}"
    if _logs_structured():
        sys.modules["logging"].getLogger("fivespot").error(line, exc_info=error)
        return
    print(line, file=sys.stderr)
    if debug:
        import traceback

        traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)


def _thread_hook(command: str, debug: bool) -> Callable[[threading.ExceptHookArgs], None]:
    def hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is None or isinstance(args.exc_value, SystemExit):
            return
        thread = args.thread.name if args.thread is not None else "a thread"
        report(f"{command} ({thread})", describe_internal_error(args.exc_value), args.exc_value,
               debug=debug)

    return hook


def _logs_structured() -> bool:
    # a process that never imported logging logs nothing structured, and a short command
    # (`fivespot check` of one file) does not pay for importing it
    logging = sys.modules.get("logging")
    return logging is not None and any(getattr(handler.formatter, "structured", False)
                                       for handler in logging.getLogger().handlers)


def _is_ours(filename: str) -> bool:
    path = Path(filename)
    return path.is_relative_to(SOURCE_ROOT) and "site-packages" not in path.parts


def _shown(filename: str) -> str:
    path = Path(filename)
    if _is_ours(filename):
        return path.relative_to(SOURCE_ROOT).as_posix()
    parts = path.parts
    if "site-packages" in parts:
        return Path(*parts[parts.index("site-packages") + 1:]).as_posix()
    return filename


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    first = lines[0] if lines else ""
    return first if len(first) <= _MAX_MESSAGE else first[:_MAX_MESSAGE] + "..."


def _detach_stdout() -> None:
    # Python flushes stdout again at exit, which would raise once more on the closed pipe.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)

