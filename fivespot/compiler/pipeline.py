"""The compiler from end to end: load, check the repo as a whole, emit, check every CEL
expression (compile and cost), lay out for GitOps, render. Pure apart from reading the repo.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fivespot.compiler import cel_preflight
from fivespot.compiler.diagnostics import CompileError
from fivespot.compiler.emit import (
    admission,
    bundle,
    crds,
    gitops,
    monitoring,
    rbac,
    readme,
    schedules,
    webhook,
    workloads,
)
from fivespot.compiler.emit.base import Artifact
from fivespot.compiler.loader import load_repo
from fivespot.compiler.output import to_yaml
from fivespot.compiler.repo import Repo, assemble

OBJECT_EMITTERS = (crds.emit, rbac.emit, admission.emit, webhook.emit, workloads.emit, bundle.emit,
                   schedules.emit, monitoring.emit)


@dataclass(frozen=True)
class Compiled:
    repo: Repo
    artifacts: tuple[Artifact, ...]
    files: dict[str, bytes]


def load(config_dir: Path) -> Repo:
    """Load and check a config repo; raise CompileError listing every problem."""
    return assemble(load_repo(config_dir))


def build(repo: Repo) -> Compiled:
    artifacts = [a for emit in OBJECT_EMITTERS for a in emit(repo)]
    artifacts += gitops.tenant_namespaces(repo, artifacts)
    _no_path_twice(artifacts)
    problems = cel_preflight.check(repo, artifacts)
    if problems:
        raise CompileError(problems)
    artifacts = gitops.decorate(artifacts)
    layout = gitops.emit(repo, artifacts)
    files = {a.path: (a.header() + to_yaml(a.obj)).encode() for a in artifacts + layout}
    files["bundle.json"] = bundle.bundle_json(repo).encode()
    files["README.md"] = readme.render(repo, artifacts).encode()
    return Compiled(repo, tuple(artifacts), dict(sorted(files.items())))


def compile_repo(config_dir: Path) -> Compiled:
    return build(load(config_dir))


def _no_path_twice(artifacts: list[Artifact]) -> None:
    seen: set[str] = set()
    for artifact in artifacts:
        if artifact.path in seen:
            raise AssertionError(f"two artifacts would be written to {artifact.path}")
        seen.add(artifact.path)
