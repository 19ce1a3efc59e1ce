"""Read a compiled OUT_DIR the way `kubectl apply -k` would, and order it the way Argo CD would.

What is applied is what the root `kustomization.yaml` reaches (its `resources`, folders with a
`kustomization.yaml` of their own followed recursively), so `argocd/` and `flux/` — objects for
the GitOps tools, not for this cluster's fivespot — are never applied by accident. The order is
the one the output declares: each object's `argocd.argoproj.io/sync-wave`, ascending; inside a
wave, kinds that others depend on first (namespaces and CRDs before what lives in them, service
accounts and roles before the bindings and workloads that use them), then by namespace and name.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from fivespot.commandline.yamlbounds import FileTooLarge, YamlTooLarge, load_all, read_capped

SYNC_WAVE: Final = "argocd.argoproj.io/sync-wave"
"""Argo CD's annotation; every object fivespot compiles carries it."""

KIND_ORDER: Final = (
    "Namespace", "CustomResourceDefinition", "ServiceAccount", "Secret", "ConfigMap",
    "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service", "PodDisruptionBudget",
    "NetworkPolicy", "Deployment",
)
"""Kinds applied first within a wave, in this order (kubectl's and Argo CD's usual order); every
other kind follows, ordered by name."""


class OutputError(Exception):
    """OUT_DIR is not something `fivespot install` can apply; the message says why and what to do."""


@dataclass(frozen=True)
class Manifest:
    """One object to apply, where it came from, and its wave."""

    obj: dict[str, Any]
    source: Path
    wave: int

    @property
    def api_version(self) -> str:
        return str(self.obj["apiVersion"])

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def namespace(self) -> str | None:
        found = self.obj["metadata"].get("namespace")
        return str(found) if found else None

    def describe(self) -> str:
        """`kind namespace/name`, the way a person names it in an error."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind.lower()} {where}"


@dataclass(frozen=True)
class Wave:
    number: int
    manifests: tuple[Manifest, ...]

    def layers(self) -> list[str]:
        """The OUT_DIR folders this wave's objects come from, for the progress lines."""
        return sorted({m.source.parts[0] for m in self.manifests})


def _load(path: Path, shown: Path) -> list[Any]:
    """The documents of a file of OUT_DIR, bounded as every command bounds YAML
    (`fivespot.commandline.yamlbounds`: a file over 10 MiB is not read, an alias or merge bomb is
    refused); raises OutputError naming it as `shown`."""
    try:
        return load_all(read_capped(path).decode("utf-8"))
    except YamlTooLarge as error:
        raise OutputError(f"{shown}:{error.line}:{error.column}: refused: {error}") from None
    except FileTooLarge as error:
        raise OutputError(f"{shown}: {error}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise OutputError(f"{shown}: cannot be read as YAML ({error})") from None


def _documents(path: Path, out_dir: Path) -> Iterator[dict[str, Any]]:
    documents = _load(path, path.relative_to(out_dir))
    for document in documents:
        if document is None:
            continue
        if not isinstance(document, dict) or not {"apiVersion", "kind", "metadata"} <= set(document):
            raise OutputError(f"{path.relative_to(out_dir)}: a document is not a Kubernetes object")
        yield document


def _kustomization(folder: Path, out_dir: Path) -> list[str]:
    path = folder / "kustomization.yaml"
    if not path.is_file():
        raise OutputError(f"{folder.relative_to(out_dir) if folder != out_dir else out_dir}: "
                          "no kustomization.yaml; is this the output of `fivespot compile`?")
    if out_dir not in path.resolve().parents:  # as `_walk` holds every entry inside OUT_DIR
        raise OutputError(f"{path}: a symlink to a file outside {out_dir}; refused, not read")
    documents = _load(path, path)
    if len(documents) > 1:
        raise OutputError(f"{path}: holds {len(documents)} YAML documents; a kustomization is one")
    data = (documents[0] if documents else None) or {}
    resources = data.get("resources") if isinstance(data, dict) else None
    if not isinstance(resources, list) or not all(isinstance(r, str) for r in resources):
        raise OutputError(f"{path}: `resources` is not a list of paths")
    return list(resources)


def _walk(folder: Path, out_dir: Path, above: tuple[Path, ...] = ()) -> Iterator[Path]:
    """The files `folder`'s kustomization reaches; `above` are the kustomizations that led here
    (a cycle is refused, as kustomize refuses it, rather than recursing until Python gives up)."""
    for entry in _kustomization(folder, out_dir):
        target = (folder / entry).resolve()
        if out_dir not in (target, *target.parents):
            raise OutputError(f"{folder / 'kustomization.yaml'}: {entry} is outside {out_dir}")
        if target.is_dir():
            if target in (*above, folder):
                raise OutputError(f"{folder / 'kustomization.yaml'}: {entry} includes a kustomization "
                                  f"that already includes this one (a cycle); refused")
            yield from _walk(target, out_dir, (*above, folder))
        elif target.is_file():
            yield target
        else:
            raise OutputError(f"{folder / 'kustomization.yaml'}: {entry} does not exist")


def _wave(obj: dict[str, Any], source: Path) -> int:
    text = ((obj.get("metadata") or {}).get("annotations") or {}).get(SYNC_WAVE, "0")
    try:
        return int(text)
    except ValueError:
        raise OutputError(f"{source}: {SYNC_WAVE} {text!r} is not an integer") from None


def load(out_dir: Path) -> list[Manifest]:
    """Every object the root kustomization (or `waves/`'s, when there is one) reaches, each
    once, with its wave."""
    root = out_dir.resolve()
    if not root.is_dir():
        raise OutputError(f"{out_dir}: no such folder; run `fivespot compile CONFIG_DIR --out {out_dir}`")
    found: list[Manifest] = []
    seen: set[tuple[str, str, str | None, str]] = set()
    # An output with a `waves/` kustomization lists every layer there, for tools that order by
    # sync wave; its root may then list only what a GitOps controller applies (Flux's objects).
    start = root / "waves" if (root / "waves" / "kustomization.yaml").is_file() else root
    for path in _walk(start, root):
        relative = path.relative_to(root)
        for obj in _documents(path, root):
            manifest = Manifest(obj, relative, _wave(obj, relative))
            key = (manifest.group, manifest.kind, manifest.namespace, manifest.name)
            if key in seen:
                raise OutputError(f"{relative}: {manifest.describe()} is listed twice")
            seen.add(key)
            found.append(manifest)
    if not found:
        raise OutputError(f"{out_dir}: the kustomization lists no objects")
    return found


def _rank(manifest: Manifest) -> tuple[int, str, str, str]:
    kind = KIND_ORDER.index(manifest.kind) if manifest.kind in KIND_ORDER else len(KIND_ORDER)
    return (kind, manifest.kind, manifest.namespace or "", manifest.name)


def waves(manifests: list[Manifest]) -> list[Wave]:
    """The manifests grouped by wave, ascending, each wave in apply order."""
    numbers = sorted({m.wave for m in manifests})
    return [Wave(n, tuple(sorted((m for m in manifests if m.wave == n), key=_rank)))
            for n in numbers]
