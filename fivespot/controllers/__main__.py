"""`python -m fivespot.controllers capacity|machine|audit --bundle PATH ...`: run a controller without the `fivespot`
entry point (tests, the demo and the benchmark start controllers this way)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from fivespot.commandline import boundary
from fivespot.controllers.cli import EXIT_BAD_INPUT, add_controllers


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fivespot.controllers", description=__doc__)
    sub = parser.add_subparsers(dest="command", metavar="CONTROLLER")
    add_controllers(sub)
    boundary.add_debug_flag(parser)
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    return boundary.run(f"controller {args.command}", lambda: handler(args), debug=args.debug)


if __name__ == "__main__":
    sys.exit(main())
