"""Reading the YAML (or JSON) files `fivespot check` decides: documents, where they start, and
the fields the API server's strict decoder would find twice.

Every document keeps the line it starts on (each result names it) and, on demand, where its
fields are (for diagnostics). A decoded mapping has lost a key given twice, so the composed node
tree is walked once for those: `spec.enabled` given twice is what `fieldValidation=Strict` denies
as `duplicate field "spec.enabled"`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from compiler.diagnostics import Diagnostic, InputError, Location
from compiler.yamlbounds import MAX_DEPTH, YamlTooLarge, check_bounds, construct

# libyaml's parser when present, as the config loader uses: the same nodes and marks, and no
# pure-Python scanner, which is quadratic on some inputs (deep flow nesting) and recursive.
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_POSITION_DEPTH = 3
"""Field positions are kept for the first levels (apiVersion, kind, metadata.name, spec.x): what
diagnostics name."""


@dataclass(frozen=True)
class Document:
    """One YAML document: its value, where it starts, where its fields are, and the fields it
    gives twice (as JSON paths)."""

    file: str
    data: Any
    line: int
    column: int = 1
    duplicates: tuple[str, ...] = ()
    _positions: Callable[[], Mapping[tuple[str, ...], Location]] | None = field(
        default=None, compare=False, repr=False)

    @property
    def start(self) -> Location:
        return Location(self.file, self.line, self.column)

    def locate(self, *path: str) -> Location:
        """Where `path` (or its nearest given parent) is; the document's start if unknown."""
        positions = self._positions() if self._positions is not None else {}
        parts = tuple(path)
        while parts and parts not in positions:
            parts = parts[:-1]
        return positions.get(parts, self.start)


def _read_text(path: Path, name: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError([Diagnostic(Location(name, 0, 0), "", "cannot read: no such file")]) from None
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise InputError([Diagnostic(Location(name, 0, 0), "", f"cannot read: {reason}")]) from None


def read_documents(path: Path, shown: str | None = None) -> list[Document]:
    """Every non-empty document of a YAML (or JSON) file; raises InputError."""
    name = shown or str(path)
    return parse_documents(_read_text(path, name), name)


def parse_documents(text: str, name: str, first_line: int = 1) -> list[Document]:
    """Every non-empty document of `text` (whose first line is line `first_line` of `name`)."""
    loader: yaml.SafeLoader | None = None
    documents = []
    offset = first_line - 1
    try:
        loader = _Loader(text)
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            check_bounds(node)
            duplicates: list[str] = []
            _duplicates(node, "", duplicates)
            data = construct(loader, node)
            if data is not None:
                positions: dict[tuple[str, ...], Location] = {}
                _positions(node, (), name, offset, positions)
                documents.append(Document(name, data, node.start_mark.line + 1 + offset,
                                          node.start_mark.column + 1, tuple(duplicates),
                                          _known(positions)))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = (Location(name, mark.line + 1 + offset, mark.column + 1) if mark
                 else Location(name, 0, 0))
        raise InputError([Diagnostic(where, "", f"invalid YAML: {error.problem or error}")]) from None
    except yaml.YAMLError as error:
        raise InputError([Diagnostic(Location(name, 0, 0), "",
                                     f"invalid YAML: {' '.join(str(error).split())}")]) from None
    except YamlTooLarge as error:
        raise InputError([Diagnostic(Location(name, error.line + offset, error.column), "",
                                     f"refused: {error}")]) from None
    except RecursionError:  # PyYAML's pure-Python parser (without libyaml) recurses per level
        raise InputError([Diagnostic(Location(name, 0, 0), "",
                                     f"refused: nested more than {MAX_DEPTH} levels deep")]) from None
    finally:
        if loader is not None:
            loader.dispose()
    return documents


def _known(positions: Mapping[tuple[str, ...], Location]
           ) -> Callable[[], Mapping[tuple[str, ...], Location]]:
    return lambda: positions


def _positions(node: yaml.Node, path: tuple[str, ...], file: str, offset: int,
               positions: dict[tuple[str, ...], Location]) -> None:
    positions.setdefault(path, Location(file, node.start_mark.line + 1 + offset,
                                        node.start_mark.column + 1))
    if isinstance(node, yaml.MappingNode) and len(path) < _POSITION_DEPTH:
        for key, value in node.value:
            key_path = path + (str(key.value),)
            positions[key_path] = Location(file, key.start_mark.line + 1 + offset,
                                           key.start_mark.column + 1)
            _positions(value, key_path, file, offset, positions)


def _duplicates(node: yaml.Node, where: str, found: list[str]) -> None:
    """Each key given twice in a mapping, as the strict JSON decoder names it (`spec.enabled`,
    `spec.items[0].name`), in the order it reads them. `check_bounds` has bounded the depth."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            name = str(key.value)
            child = f"{where}.{name}" if where else name
            if name in seen and child not in found:
                found.append(child)
            seen.add(name)
            _duplicates(value, child, found)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _duplicates(item, f"{where}[{index}]", found)
