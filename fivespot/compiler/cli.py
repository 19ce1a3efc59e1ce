"""The compiler's commands: `fivespot init`, `schema`, `reference`, `compile`, `run-example`,
`check` and `test`.

`register(subparsers)` adds them to the `fivespot` parser (`fivespot.cli`). Each handler is a thin
shell over the compiler's pure functions, and reports the errors these commands expect (the
diagnostics of a repo or an object file that is wrong, a refused `--out`) itself, with exit code
2; anything else is the boundary's (`fivespot.commandline.boundary`).
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from fivespot.commandline import collector, exitcodes
from fivespot.compiler.diagnostics import CompileError, InputError

if TYPE_CHECKING:  # imported by the handlers that need them: `check` of one object pays for none
    from fivespot.compiler.pipeline import Compiled
    from fivespot.policies.kubeversions import KubernetesVersion

EXIT_OK, EXIT_NEGATIVE, EXIT_BAD_INPUT = exitcodes.OK, exitcodes.NEGATIVE, exitcodes.BAD_INPUT


def _compile(args: argparse.Namespace) -> int:
    from fivespot.compiler.compile_warnings import compile_warnings
    from fivespot.compiler.output import diff_tree, read_tree, write_tree
    from fivespot.compiler.ownership import check_target
    from fivespot.compiler.pipeline import compile_repo

    # before compiling, and with --check too: it reads what compile would replace, and the
    # command it suggests is compile's (a folder compile refuses is not read, not even `/`)
    check_target(args.out, config_dir=args.config_dir)
    compiled = compile_repo(args.config_dir)
    for warning in compile_warnings(compiled.repo, args.out, read_tree(args.out), compiled.files):
        print(f"warning: {warning}", file=sys.stderr)
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


def _summary(compiled: Compiled, out: Path) -> str:
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


Handler = Callable[[argparse.Namespace], int]


def register(sub: Any) -> None:
    """Add the compiler's commands to a parser's subcommands."""
    init = sub.add_parser("init", help="scaffold a commented config repo that compiles and passes its fixtures",
                          description="Write a config repo (one consumer, the built-in providers, one "
                                      "tenant, fixtures, JSON Schemas) into DIR, which must be new or empty.")
    init.add_argument("directory", type=Path, metavar="DIR", help="a new or empty folder")
    init.set_defaults(handler=_init)

    schema = sub.add_parser("schema", help="write the JSON Schemas of the config kinds, for editors",
                            description="Write fivespot-config.schema.json (any config document) and "
                                        "one schema per kind into DIR; without --out, print the "
                                        "combined schema. Editors with the YAML language server "
                                        "use them through `# yaml-language-server: $schema=PATH`.")
    schema.add_argument("--out", type=Path, metavar="DIR", help="folder to write the schemas into")
    schema.set_defaults(handler=_schema)

    reference = sub.add_parser("reference", help="print the field reference of every kind (Markdown)")
    reference.set_defaults(handler=_reference)

    compile_ = sub.add_parser("compile", help="compile a config repo into cluster artifacts")
    compile_.add_argument("config_dir", type=Path, metavar="CONFIG_DIR",
                          help="folder of config documents (.yaml and .yml files, any layout)")
    compile_.add_argument("--out", type=Path, required=True, metavar="OUT_DIR",
                          help="folder to write the cluster artifacts into")
    compile_.add_argument("--check", action="store_true",
                          help="exit 1 with a unified diff when OUT_DIR is not what CONFIG_DIR compiles to")
    compile_.set_defaults(handler=_reported(_compile))

    example = sub.add_parser("run-example", help="compile an example repo and show its fixtures' verdicts")
    example.add_argument("config_dir", type=Path, metavar="EXAMPLE_DIR",
                         help="an example config repo (e.g. examples/agent-sandbox/config)")
    example.add_argument("--out", type=Path, required=True, metavar="OUT_DIR",
                         help="folder to write its compiled output into")
    example.set_defaults(handler=_reported(_run_example))

    check = sub.add_parser(
        "check", help="decide objects as the API server's admission would, without a cluster",
        description="Evaluate each object against the compiled CRD schemas and rules and every "
                    "bound ValidatingAdmissionPolicy. Exit 0 when all are allowed, 1 when any is "
                    "denied, 2 on bad input.")
    check.add_argument("objects", type=Path, nargs="+", metavar="OBJECTS.yaml",
                       help="files of objects to decide (multi-document YAML or JSON), "
                            "folders (every .yaml/.yml/.json file in them, hidden ones skipped), "
                            "or - for standard input")
    check.add_argument("--policies", type=Path, required=True, action="append", metavar="OUT_DIR",
                       help="output of `fivespot compile` (repeat to add more CRDs/policies)")
    check.add_argument("--namespaces", type=Path, metavar="NS.yaml",
                       help="Namespace objects, for bindings that select namespaces by label")
    check.add_argument("--old", type=Path, metavar="OLD.yaml",
                       help="previous versions: an object found here is checked as an UPDATE")
    check.add_argument("--field-validation", type=_field_validation, default="Strict",
                       metavar="Strict|Warn|Ignore",
                       help="the requests' fieldValidation, as kubectl sends it: Strict (its "
                            "default) denies unknown and duplicate fields, Warn (`--validate=warn`) "
                            "warns about them, Ignore (`--validate=false`) drops them silently")
    check.add_argument("--user-roles", type=Path, metavar="ROLES.yaml",
                       help="the Roles and ClusterRoles the requesting user holds: the policies' "
                            "authorizer checks (may the author patch the target?) are decided by "
                            "their rules (a Role's in its namespace); without it, those checks are "
                            "assumed allowed, since nothing offline knows the user's RBAC")
    check.add_argument("-j", "--jobs", type=_jobs, metavar="N",
                       help="decide on at most N processes (default: every usable core, when "
                            "there are enough objects to gain from it)")
    check.add_argument("--no-cache", dest="cache", action="store_false",
                       help="neither reuse nor keep the policies read and the CEL compiled in an "
                            "earlier run (kept by content in ~/.cache/fivespot/check)")
    check.add_argument("--kubernetes-version", type=_kubernetes_version, metavar="X.Y",
                       help="decide and word as that API server version does (supported: "
                            f"{_supported_range()}; default: the newest the compiled policies "
                            "target, else the newest supported)")
    check.add_argument("-o", "--output", choices=("table", "json"), default="table",
                       help="table (default) or json")
    check.set_defaults(handler=_reported(_check))

    test = sub.add_parser("test", help="compile a config repo in memory and run its fixtures",
                          description="Exit 0 when every fixture gets its expected verdict, 1 "
                                      "when any does not, 2 on bad input.")
    test.add_argument("config_dir", type=Path, metavar="CONFIG_DIR",
                      help="the config repo whose Fixture documents to run")
    test.add_argument("--kubernetes-version", type=_kubernetes_version, metavar="X.Y",
                      help="decide as that API server version does (supported: "
                           f"{_supported_range()}; default: the newest the Platform targets)")
    test.add_argument("-o", "--output", choices=("table", "json"), default="table",
                      help="table (default) or json")
    test.set_defaults(handler=_reported(_test))


def _jobs(text: str) -> int:
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number of processes, 1 or more")
    return jobs


def _supported_range() -> str:
    from fivespot.policies.kubeversions import SUPPORTED_RANGE

    return SUPPORTED_RANGE


def _kubernetes_version(text: str) -> KubernetesVersion:
    """A supported Kubernetes minor (`1.34`, `v1.34`, `1.34.4`)."""
    from fivespot.policies import kubeversions

    try:
        return kubeversions.resolve(text)
    except kubeversions.UnsupportedVersion as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _field_validation(text: str) -> str:
    """Strict, Warn or Ignore, in any case (kubectl's `--validate` spells them in lower case)."""
    from fivespot.policies.admission_eval import FIELD_VALIDATIONS

    for mode in FIELD_VALIDATIONS:
        if text.lower() == mode.lower():
            return mode
    raise argparse.ArgumentTypeError(f"{text!r}: expected one of {', '.join(FIELD_VALIDATIONS)}")


def _init(args: argparse.Namespace) -> int:
    from fivespot.compiler.scaffold import ScaffoldError, init

    try:
        written = init(args.directory)
    except ScaffoldError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"wrote {len(written)} files into {args.directory}:")
    for path in written:
        print(f"  {path}")
    print(f"next: fivespot test {args.directory} && fivespot compile {args.directory} --out OUT_DIR")
    return EXIT_OK


def _schema(args: argparse.Namespace) -> int:
    from fivespot.compiler.schemas import COMBINED, schema_files

    files = schema_files()
    if args.out is None:
        sys.stdout.write(files[COMBINED])
        return EXIT_OK
    if args.out.exists() and not args.out.is_dir():
        print(f"error: {args.out} is a file; --out names a folder", file=sys.stderr)
        return EXIT_BAD_INPUT
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in sorted(files.items()):
        (args.out / name).write_text(text)
    print(f"wrote {len(files)} JSON Schemas into {args.out} (start a config file with "
          f"`# yaml-language-server: $schema={args.out / COMBINED}`)")
    return EXIT_OK


def _reference(args: argparse.Namespace) -> int:
    from fivespot.compiler.reference import render

    sys.stdout.write(render())
    return EXIT_OK


def _run_example(args: argparse.Namespace) -> int:
    from fivespot.compiler.check.fixtures import render_test_table, run_compiled_fixtures
    from fivespot.compiler.output import write_tree
    from fivespot.compiler.ownership import check_target
    from fivespot.compiler.pipeline import compile_repo

    check_target(args.out, config_dir=args.config_dir)
    compiled = compile_repo(args.config_dir)
    write_tree(compiled.files, args.out, config_dir=args.config_dir)
    print(_summary(compiled, args.out))
    results = run_compiled_fixtures(compiled, args.config_dir)
    print(f"  fixtures: {len(results)}")
    print(render_test_table(results))
    return EXIT_OK if all(r.passed for r in results) else EXIT_NEGATIVE


def _check(args: argparse.Namespace) -> int:
    from fivespot.compiler.check.objects import check
    from fivespot.compiler.check.render import render_check_json, render_check_table

    with collector.fewer_collections():
        results = check(args.policies, args.objects, old=args.old, namespaces=args.namespaces,
                        field_validation=args.field_validation, jobs=args.jobs, cache=args.cache,
                        server=args.kubernetes_version, user_roles=args.user_roles)
        print(render_check_json(results) if args.output == "json" else render_check_table(results))
    return EXIT_OK if all(r.verdict.allowed for r in results) else EXIT_NEGATIVE


def _test(args: argparse.Namespace) -> int:
    from fivespot.compiler.check.fixtures import render_test_json, render_test_table, run_fixtures

    with collector.fewer_collections():
        results = run_fixtures(args.config_dir, args.kubernetes_version)
        print(render_test_json(results) if args.output == "json" else render_test_table(results))
    return EXIT_OK if all(r.passed for r in results) else EXIT_NEGATIVE


def _reported(handler: Handler) -> Handler:
    """`handler` with the errors these commands expect reported (see `_handle`)."""

    @functools.wraps(handler)
    def reported(args: argparse.Namespace) -> int:
        return _handle(handler, args)

    return reported


def _handle(handler: Handler, args: argparse.Namespace) -> int:
    """The handler's exit code, with the errors the compiler's commands expect reported."""
    try:
        return handler(args)
    except InputError as error:
        return _diagnostics(error.diagnostics, "nothing was checked")
    except CompileError as error:
        return _diagnostics(error.diagnostics, "no fixture was run" if args.command == "test"
                            else "nothing was written")
    except Exception as error:
        # only a handler that imported compiler.ownership can have raised its OutputRefused, and
        # `check` (one file, in an editor's hook) does not pay for importing it
        ownership = sys.modules.get("fivespot.compiler.ownership")
        if ownership is None or not isinstance(error, ownership.OutputRefused):
            raise
        print(f"fivespot {args.command}: --out {error}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _diagnostics(diagnostics: Sequence[object], outcome: str) -> int:
    for diagnostic in diagnostics:
        print(diagnostic, file=sys.stderr)
    count = len(diagnostics)
    print(f"{count} error{'s' if count != 1 else ''}; {outcome}", file=sys.stderr)
    return EXIT_BAD_INPUT
