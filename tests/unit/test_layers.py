"""The layers hold: the import-linter contracts pass, a forbidden import fails them, and each
process loads only its own layers.

`make test` runs `lint-imports` on the checkout; these tests prove the check can fail (a planted
import in a temporary copy of the tree breaks the contract it should, a planted import circle
breaks the acyclic one wherever the import is written) and check what the
contracts cannot see: the modules a process really has loaded after importing its entry point.
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTRACTS = ROOT / ".importlinter"


def _contracts() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(CONTRACTS)
    return parser


PACKAGES = tuple(sorted(p.name for p in (ROOT / "fivespot").iterdir()
                        if (p / "__init__.py").exists()))
"""fivespot's packages (`fivespot.api`, ...): every one is a layer of the contracts."""
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on `tree`, whose packages shadow the installed ones (PYTHONPATH first)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--config", str(tree / ".importlinter")],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the checkout's packages and contracts."""
    shutil.copytree(ROOT / "fivespot", tmp_path / "fivespot",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(CONTRACTS, tmp_path / ".importlinter")
    return tmp_path


def plant(tree: Path, module: str, line: str) -> None:
    path = tree / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\n{line}  # planted by test_layers\n")


def test_the_contracts_and_the_wheel_cover_every_package_and_the_type_check_the_tests_too() -> None:
    import tomllib

    shipped = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()} - {"tests", "bench"}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]
    contracts = _contracts()
    assert shipped == {"fivespot"}, "one top-level package installed (decision 0037)"
    assert {p.name for p in (ROOT / "fivespot").glob("*.py")} == {"__init__.py", "__main__.py"}, \
        "every module is in a package, so in a layer (a command goes in fivespot/cli/)"
    assert contracts["importlinter"]["root_packages"].split() == ["fivespot"]
    layered = set(contracts["importlinter:contract:layers"]["layers"].replace("|", " ").split())
    assert layered == {f"fivespot.{package}" for package in PACKAGES}
    assert set(project["mypy"]["packages"]) == shipped | {"tests"}
    assert {p.rstrip("*") for p in project["setuptools"]["packages"]["find"]["include"]} == shipped


def test_the_checkout_keeps_every_contract() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_unchanged_copy_keeps_every_contract(tree: Path) -> None:
    result = lint_imports(tree)
    assert result.returncode == 0, result.stdout + result.stderr


LAYERS = "Layers: cli > devcluster > compiler | webhook | controllers"


@pytest.mark.parametrize("module,line,broken", [
    ("fivespot.webhook.review", "import fivespot.compiler.pipeline",
     LAYERS),
    ("fivespot.controllers.capacity.decide", "from fivespot.webhook import review",
     LAYERS),
    ("fivespot.api.kinds.base", "import fivespot.runtime.kube",
     LAYERS),
    ("fivespot.runtime.cache", "import fivespot.controllers.cli",
     LAYERS),
    ("fivespot.controllers.spotschedules.manual", "import fivespot.devcluster.kubectl",
     LAYERS),
    ("fivespot.controllers.capacity.decide", "from kubernetes import client",
     "Only the runtime talks to the API server"),
    ("fivespot.compiler.emit.rbac", "from fivespot.runtime import kube",
     "The compiler and the checker run offline"),
    ("fivespot.controllers.cli", "import flask",
     "Only the webhook serves HTTP admission"),
    ("fivespot.compiler.pipeline", "import fivespot.compiler.check.objects",
     "fivespot/compiler/ holds two products"),
], ids=["webhook-imports-compiler", "controllers-import-webhook", "api-imports-runtime",
        "runtime-imports-controllers", "shipped-code-imports-devcluster",
        "controller-imports-the-client", "compiler-imports-runtime", "controller-serves-http",
        "compiling-imports-the-checker"])
def test_a_planted_forbidden_import_breaks_its_contract(tree: Path, module: str, line: str,
                                                        broken: str) -> None:
    plant(tree, module, line)
    result = lint_imports(tree)
    assert result.returncode != 0, result.stdout
    failed = result.stdout.split("Broken contracts", 1)[-1]
    assert broken in failed and module in failed, result.stdout


ACYCLIC = "No import cycles"


@pytest.mark.parametrize("module,line,package", [
    ("fivespot.policies.admission_eval.result", "from fivespot.policies.admission_eval import status",
     "fivespot.policies.admission_eval"),
    ("fivespot.controllers.spotschedules.controller",
     "def _planted() -> None:\n    from fivespot.controllers.spotschedules import composite_controller",
     "fivespot.controllers.spotschedules"),
    ("fivespot.devcluster.narration",
     "import typing\nif typing.TYPE_CHECKING:\n    import fivespot.devcluster.machine_demo",
     "fivespot.devcluster"),
    ("fivespot.compiler.emit.base", "import fivespot.compiler.pipeline", "fivespot.compiler"),
], ids=["module-level", "inside-a-function", "under-type-checking", "between-subpackages"])
def test_an_import_circle_inside_a_package_breaks_the_acyclic_contract(tree: Path, module: str,
                                                                       line: str, package: str) -> None:
    plant(tree, module, line)
    result = lint_imports(tree)
    assert result.returncode != 0, result.stdout
    failed = result.stdout.split("Broken contracts", 1)[-1]
    assert ACYCLIC in failed and f"No cycles are allowed in {package}." in failed, result.stdout


def test_no_top_level_package_imports_another_that_imports_it_back() -> None:
    import grimp

    graph = grimp.build_graph("fivespot")
    edges: dict[str, set[str]] = {p: set() for p in PACKAGES}
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            a, b = _package(importer), _package(imported)
            if a in edges and b in edges and a != b:
                edges[a].add(b)
    done: set[str] = set()

    def visit(package: str, path: tuple[str, ...]) -> None:
        assert package not in path, f"import cycle: {' -> '.join((*path, package))}"
        if package not in done:
            for other in sorted(edges[package]):
                visit(other, (*path, package))
            done.add(package)

    for package in PACKAGES:
        visit(package, ())
    assert edges["api"] == set() and edges["runtime"] <= {"api", "commandline"}


def _package(module: str) -> str:
    """`fivespot.compiler.emit.rbac` -> `compiler`; `fivespot` itself -> ``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _loaded_after(statement: str) -> set[str]:
    """fivespot's packages (`compiler`, ...) and the other top-level modules loaded by it."""
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT)
    return {_package(name) if name.startswith("fivespot.") else name.split(".")[0]
            for name in out.stdout.split()}


def test_the_webhook_process_does_not_load_the_compiler_or_the_controllers() -> None:
    loaded = _loaded_after(  # what `webhook serve` runs
        "import fivespot.webhook.cli, fivespot.webhook.server")
    assert "webhook" in loaded and "runtime" in loaded
    assert not loaded & {"compiler", "controllers", "devcluster"}


def test_the_controller_processes_do_not_load_the_compiler_or_the_webhook() -> None:
    loaded = _loaded_after("import fivespot.controllers.cli, fivespot.controllers.capacity.controller,"
                           " fivespot.controllers.spotschedules.cli,"
                           " fivespot.controllers.spotschedules.controller")
    assert "controllers" in loaded and "runtime" in loaded
    assert not loaded & {"compiler", "webhook", "devcluster", "flask", "gunicorn"}


def test_the_compiler_does_not_load_the_runtime_or_the_kubernetes_client() -> None:
    loaded = _loaded_after("import fivespot.compiler.pipeline, fivespot.compiler.check.objects")
    assert not loaded & {"runtime", "kubernetes", "webhook", "controllers", "devcluster"}
