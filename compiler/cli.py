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
from pathlib import Path
from typing import Callable, Sequence

from commandline import boundary, exitcodes
from compiler.diagnostics import CompileError, InputError

EXIT_OK, EXIT_NEGATIVE, EXIT_BAD_INPUT = exitcodes.OK, exitcodes.NEGATIVE, exitcodes.BAD_INPUT


def _compile(args: argparse.Namespace) -> int:
    from compiler.output import diff_tree, write_tree
    from compiler.ownership import check_target
    from compiler.pipeline import compile_repo

    if not args.check:
        check_target(args.out, config_dir=args.config_dir)  # refuse before compiling
    compiled = compile_repo(args.config_dir)
    if args.check:
        diff = diff_tree(compiled.files, args.out)
        if diff:
            sys.stdout.write(diff)
            print(f"{args.out} is stale: run `fivespot compile {args.config_dir} --out {args.out}` "
                  "and commit the result", file=sys.stderr)
            return EXIT_NEGATIVE
        print(f"{args.out} is up to date ({len(compiled.files)} files)")
        return EXIT_OK
    write_tree(compiled.files, args.out, config_dir=args.config_dir)
    print(_summary(compiled, args.out))
    return EXIT_OK


def _summary(compiled: object, out: Path) -> str:
    from compiler.pipeline import Compiled

    assert isinstance(compiled, Compiled)
    counts: dict[str, int] = {}
    for artifact in compiled.artifacts:
        counts[artifact.kind] = counts.get(artifact.kind, 0) + 1
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    repo = compiled.repo
    lines = [
        f"compiled {len(compiled.files)} files into {out}: {kinds}",
        f"  consumers: {', '.join(c.metadata.name for c in repo.consumers) or 'none (no capacity component)'}",
        f"  providers: {', '.join(repo.provider_kinds) or 'none'}",
        f"  tenant policies: {', '.join(t.metadata.name for t in repo.tenants) or 'none'}",
    ]
    return "\n".join(lines)


# Long-running commands live with their packages; they import the Kubernetes client, so they are
# loaded only when asked for, and `fivespot compile` in CI starts in a tenth of a second.
RUNTIME_COMMANDS: dict[str, tuple[str, str]] = {
    "controller": ("controllers.cli", "run a controller (capacity)"),
    "provider": ("controllers.providers.cli", "run a built-in schedule provider"),
    "webhook": ("webhook.cli", "serve the admission webhook"),
}


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fivespot", description=__doc__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    compile_ = sub.add_parser("compile", help="compile a config repo into cluster artifacts")
    compile_.add_argument("config_dir", type=Path, metavar="CONFIG_DIR")
    compile_.add_argument("--out", type=Path, required=True, metavar="OUT_DIR")
    compile_.add_argument("--check", action="store_true",
                          help="exit 1 with a unified diff when OUT_DIR is not what CONFIG_DIR compiles to")
    compile_.set_defaults(handler=_compile)

    example = sub.add_parser("run-example", help="compile an example repo and show its fixtures' verdicts")
    example.add_argument("config_dir", type=Path, metavar="EXAMPLE_DIR")
    example.add_argument("--out", type=Path, required=True, metavar="OUT_DIR")
    example.set_defaults(handler=_run_example)

    check = sub.add_parser(
        "check", help="decide objects as the API server's admission would, without a cluster",
        description="Evaluate each object against the compiled CRD schemas and rules and every "
                    "bound ValidatingAdmissionPolicy. Exit 0 when all are allowed, 1 when any is "
                    "denied, 2 on bad input.")
    check.add_argument("objects", type=Path, nargs="+", metavar="OBJECTS.yaml")
    check.add_argument("--policies", type=Path, required=True, action="append", metavar="OUT_DIR",
                       help="output of `fivespot compile` (repeat to add more CRDs/policies)")
    check.add_argument("--namespaces", type=Path, metavar="NS.yaml",
                       help="Namespace objects, for bindings that select namespaces by label")
    check.add_argument("--old", type=Path, metavar="OLD.yaml",
                       help="previous versions: an object found here is checked as an UPDATE")
    check.add_argument("-o", "--output", choices=("table", "json"), default="table")
    check.set_defaults(handler=_check)

    test = sub.add_parser("test", help="compile a config repo in memory and run its fixtures",
                          description="Exit 0 when every fixture gets its expected verdict, 1 "
                                      "when any does not, 2 on bad input.")
    test.add_argument("config_dir", type=Path, metavar="CONFIG_DIR")
    test.add_argument("-o", "--output", choices=("table", "json"), default="table")
    test.set_defaults(handler=_test)

    wanted = next((a for a in argv if not a.startswith("-")), None)
    for name, (module, summary) in RUNTIME_COMMANDS.items():
        if name == wanted:
            importlib.import_module(module).register(sub)
        else:
            sub.add_parser(name, help=summary)
    return parser


def _run_example(args: argparse.Namespace) -> int:
    from compiler.offline_check import render_test_table, run_compiled_fixtures
    from compiler.output import write_tree
    from compiler.ownership import check_target
    from compiler.pipeline import compile_repo

    check_target(args.out, config_dir=args.config_dir)
    compiled = compile_repo(args.config_dir)
    write_tree(compiled.files, args.out, config_dir=args.config_dir)
    print(_summary(compiled, args.out))
    results = run_compiled_fixtures(compiled, args.config_dir)
    print(f"  fixtures: {len(results)}")
    print(render_test_table(results))
    return EXIT_OK if all(r.passed for r in results) else EXIT_NEGATIVE


def _check(args: argparse.Namespace) -> int:
    from compiler.offline_check import check, render_check_json, render_check_table

    results = check(args.policies, args.objects, old=args.old, namespaces=args.namespaces)
    print(render_check_json(results) if args.output == "json" else render_check_table(results))
    return EXIT_OK if all(r.verdict.allowed for r in results) else EXIT_NEGATIVE


def _test(args: argparse.Namespace) -> int:
    from compiler.offline_check import render_test_json, render_test_table, run_fixtures

    results = run_fixtures(args.config_dir)
    print(render_test_json(results) if args.output == "json" else render_test_table(results))
    return EXIT_OK if all(r.passed for r in results) else EXIT_NEGATIVE


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(arguments)
    boundary.add_debug_flag(parser)
    args = parser.parse_args(arguments)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    command = " ".join(["fivespot", *_command_words(args)])
    return boundary.run(command, lambda: _handle(handler, args), debug=args.debug)


def _command_words(args: argparse.Namespace) -> list[str]:
    """`compile`, `webhook serve`, `provider manual`: the words that name what ran."""
    words = [args.command]
    for attribute in ("webhook_command", "controller", "name"):
        value = getattr(args, attribute, None)
        if isinstance(value, str):
            words.append(value)
    return words


def _handle(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """The handler's exit code, with the errors every fivespot command expects reported."""
    from compiler.ownership import OutputRefused

    try:
        return handler(args)
    except InputError as error:
        return _diagnostics(error.diagnostics, "nothing was checked")
    except CompileError as error:
        return _diagnostics(error.diagnostics, "nothing was written")
    except OutputRefused as error:
        print(f"fivespot {args.command}: --out {error}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _diagnostics(diagnostics: Sequence[object], outcome: str) -> int:
    for diagnostic in diagnostics:
        print(diagnostic, file=sys.stderr)
    count = len(diagnostics)
    print(f"{count} error{'s' if count != 1 else ''}; {outcome}", file=sys.stderr)
    return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
