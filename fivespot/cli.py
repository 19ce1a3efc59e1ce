"""The `fivespot` command line; each subcommand is a thin shell over a package's pure functions.

Exit codes (`commandline.exitcodes`): 0 success, 1 a verdict the user asked about is negative
(stale output, a denied object, a failing fixture), 2 bad input (with `FILE:LINE:COL: field:
message` on stderr, or a refused `--out`), 3 an internal error; every handler runs behind
`commandline.boundary`, so none of them ends in a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Callable, Final, Sequence

from commandline import boundary, collector, exitcodes
from commandline.version import version
from compiler import cli as compiler_cli

RUNTIME_COMMANDS: Final[dict[str, tuple[str, str]]] = {
    "controller": ("controllers.cli", "run a controller (capacity)"),
    "provider": ("controllers.providers.cli", "run a built-in schedule provider"),
    "webhook": ("webhook.cli", "serve the admission webhook"),
    "install": ("deploy.cli:register_install", "apply a compiled OUT_DIR to a cluster, wave by wave"),
    "uninstall": ("deploy.cli:register_uninstall", "delete what `fivespot install` applied"),
    "dev": ("devcluster.dev", "run a config repo on a local control plane, components as processes"),
    "schedule": ("fivespot.preview", "preview schedules offline (schedule preview)"),
}
"""Long-running commands, each registered by its package's `register(subparsers)`. They import the
Kubernetes client, so a module is loaded only when its command is asked for, and `fivespot
compile` in CI starts in a tenth of a second; the compiler's commands are always registered.
A value is "module" (its `register`) or "module:function" for a package with several commands."""


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fivespot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_Version, nargs=0, help="show fivespot's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    compiler_cli.register(sub)
    wanted = next((a for a in argv if not a.startswith("-")), None)
    for name, (target, summary) in RUNTIME_COMMANDS.items():
        if name == wanted:
            module, _, function = target.partition(":")
            getattr(importlib.import_module(module), function or "register")(sub)
        else:
            sub.add_parser(name, help=summary)
    return parser


class _Version(argparse.Action):
    """`--version`, looked up only when given (`commandline.version`)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(f"fivespot {version()}")
        parser.exit()


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(arguments)
    boundary.add_debug_flag(parser)
    args = parser.parse_args(arguments)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return exitcodes.BAD_INPUT
    command = " ".join(["fivespot", *_command_words(args)])
    code = boundary.run(command, lambda: handler(args), debug=args.debug)
    if argv is None:  # the process's own entry point: it exits next
        collector.spare_the_shutdown()
    return code


def _command_words(args: argparse.Namespace) -> list[str]:
    """`compile`, `webhook serve`, `provider manual`: the words that name what ran."""
    words = [args.command]
    for attribute in ("webhook_command", "schedule_command", "controller", "name"):
        value = getattr(args, attribute, None)
        if isinstance(value, str):
            words.append(value)
    return words


if __name__ == "__main__":
    sys.exit(main())
