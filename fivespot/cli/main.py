"""The `fivespot` command line; each subcommand is a thin shell over a package's pure functions.

Exit codes (`fivespot.commandline.exitcodes`): 0 success, 1 a verdict the user asked about is negative
(stale output, a denied object, a failing fixture), 2 bad input (with `FILE:LINE:COL: field:
message` on stderr, or a refused `--out`), 3 an internal error; every handler runs behind
`fivespot.commandline.boundary`, so none of them ends in a traceback.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import re
import sys
from typing import Any, Callable, Final, NoReturn, Sequence

from fivespot.commandline import boundary, collector, exitcodes
from fivespot.commandline.version import version
from fivespot.compiler import cli as compiler_cli

RUNTIME_COMMANDS: Final[dict[str, tuple[str, str]]] = {
    "controller": ("fivespot.controllers.cli", "run a controller (capacity)"),
    "provider": ("fivespot.controllers.spotschedules.cli", "run a built-in schedule provider"),
    "webhook": ("fivespot.webhook.cli", "serve the admission webhook"),
    "install": ("fivespot.deploy.cli:register_install", "apply a compiled OUT_DIR to a cluster, wave by wave"),
    "uninstall": ("fivespot.deploy.cli:register_uninstall", "delete what `fivespot install` applied"),
    "dev": ("fivespot.devcluster.dev", "run a config repo on a local control plane, components as processes"),
    "schedule": ("fivespot.cli.preview", "preview schedules offline, or override one on a live "
                 "cluster (schedule preview|override)"),
    "audit": ("fivespot.cli.audit", "which stored objects a compiled output's policies would deny"),
    "import": ("fivespot.cli.importer", "write fivespot config and objects from kube-green, "
               "kube-downscaler or KEDA cron (files or a cluster), with a report"),
}
"""Long-running commands, each registered by its package's `register(subparsers)`. They import the
Kubernetes client, so a module is loaded only when its command is asked for, and `fivespot
compile` in CI starts in a tenth of a second; the compiler's commands are always registered.
A value is "module" (its `register`) or "module:function" for a package with several commands."""


DESCRIPTION: Final = """\
fivespot compiles a config repo into the artifacts a cluster needs (CRDs, admission policies,
RBAC, workloads, GitOps layout), checks objects offline as the API server would, and runs the
admission webhook and the controllers.

Exit codes: 0 success; 1 the answer asked for is no (stale output, a denied object, a failing
fixture); 2 bad input, reported as FILE:LINE:COL: field: message; 3 an internal error."""


class _Parser(argparse.ArgumentParser):
    """Every fivespot parser (subcommands are made with the parser's own class): long options are
    not matched by prefix (`--out` is not taken for `--output`), and a mistyped choice gets a
    suggestion (`compiel`: did you mean 'compile'?)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if found is not None:
            choices = re.findall(r"'([^']*)'", found.group(2))
            close = difflib.get_close_matches(found.group(1), choices, n=1)
            if close:
                message += f" (did you mean {close[0]!r}?)"
        super().error(message)


def build_parser(argv: Sequence[str] = (), *, everything: bool = False) -> argparse.ArgumentParser:
    parser = _Parser(prog="fivespot", description=DESCRIPTION,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_Version, nargs=0, help="show fivespot's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    compiler_cli.register(sub)
    wanted = next((a for a in argv if not a.startswith("-")), None)
    for name, (target, summary) in RUNTIME_COMMANDS.items():
        if everything or name == wanted:
            module, _, function = target.partition(":")
            getattr(importlib.import_module(module), function or "register")(sub)
        else:
            sub.add_parser(name, help=summary)
    return parser


def full_parser() -> argparse.ArgumentParser:
    """The parser with every command registered, as the CLI reference (docs/reference/cli.md)
    documents it: `build_parser` registers a long-running command only when it is the one run."""
    parser = build_parser(everything=True)
    boundary.add_debug_flag(parser)
    return parser


class _Version(argparse.Action):
    """`--version`, looked up only when given (`fivespot.commandline.version`)."""

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
