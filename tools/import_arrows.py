"""Count the import arrows between fivespot's packages (`fivespot.compiler`, `fivespot.api`, ...): `python tools/import_arrows.py`.

An arrow A -> B is every import line in package A that names a module of package B (also imports
inside functions), as grimp (import-linter's graph) reads them. `--depth 2` counts between
subpackages (`compiler.emit -> api.kinds`). Run it from the root of a checkout; it measures that
checkout's packages, so the same command before and after a change shows which arrows went away.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import grimp


def arrows(root: Path, depth: int) -> Counter[tuple[str, str]]:
    sys.path.insert(0, str(root))
    graph = grimp.build_graph("fivespot")
    counts: Counter[tuple[str, str]] = Counter()
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            a = ".".join(importer.split(".")[1:depth + 1]) or "fivespot"
            b = ".".join(imported.split(".")[1:depth + 1]) or "fivespot"
            if a != b:
                details = graph.get_import_details(importer=importer, imported=imported)
                counts[(a, b)] += len(details) or 1
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=1, help="1: top-level packages; 2: subpackages")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the checkout (default: here)")
    args = parser.parse_args()
    for (a, b), n in sorted(arrows(args.root.resolve(), args.depth).items()):
        print(f"{n:5d}  {a} -> {b}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
