"""The lowest versions pyproject.toml allows for fivespot's runtime dependencies, as a pip
constraints file, so `make unit-lowest` can run the unit suite on exactly those.

The bounds themselves live only in pyproject.toml; this reads them. Every runtime dependency (the
`dependencies` and the runtime extras) must have a lower bound (`>=` or `==`) and an upper bound
(`<` or `==`): the suite proves the range at both ends, the newest versions in `.venv/` and the
lowest in `.venv-lowest/`.

    python tools/lower_bounds.py            # prints `name==version` lines
    python tools/lower_bounds.py --check    # exit 1 naming any runtime dependency without both bounds
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

from packaging.requirements import Requirement

PYPROJECT: Final = Path(__file__).resolve().parents[1] / "pyproject.toml"
RUNTIME_EXTRAS: Final = ("calendars", "image")
"""Optional dependencies a user installs to run fivespot or build its image (as opposed to `dev`)."""


def runtime_requirements(pyproject: Path = PYPROJECT) -> list[Requirement]:
    project = tomllib.loads(pyproject.read_text())["project"]
    texts = list(project["dependencies"])
    for extra in RUNTIME_EXTRAS:
        texts += project["optional-dependencies"][extra]
    return [Requirement(text) for text in texts]


def lower_bound(requirement: Requirement) -> str | None:
    for spec in requirement.specifier:
        if spec.operator in (">=", "=="):
            return spec.version
    return None


def has_upper_bound(requirement: Requirement) -> bool:
    return any(spec.operator in ("<", "==") for spec in requirement.specifier)


def problems(requirements: Sequence[Requirement]) -> Iterator[str]:
    for requirement in requirements:
        missing = [what for what, ok in (("lower", lower_bound(requirement) is not None),
                                         ("upper", has_upper_bound(requirement))) if not ok]
        if missing:
            yield f"{requirement}: no {' and no '.join(missing)} bound"


def constraints(requirements: Sequence[Requirement]) -> str:
    return "".join(f"{r.name}=={lower_bound(r)}\n" for r in requirements)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    requirements = runtime_requirements()
    found = list(problems(requirements))
    for problem in found:
        print(f"{PYPROJECT.name}: {problem}", file=sys.stderr)
    if found:
        return 1
    if not args.check:
        sys.stdout.write(constraints(requirements))
    return 0


if __name__ == "__main__":
    sys.exit(main())
