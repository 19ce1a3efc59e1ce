"""Read a config repo: every `*.yaml`/`*.yml` under a folder, multi-document, any layout.

YAML is composed into nodes first so each field keeps its line and column; pydantic then
validates, and each of its errors is placed back on the line that caused it. Nothing here
raises on bad input: problems come back as diagnostics, all of them, sorted.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml
from pydantic import BaseModel, ValidationError

from fivespot.commandline.yamlbounds import (
    MAX_DEPTH,
    Budget,
    FileTooLarge,
    YamlTooLarge,
    check_bounds,
    construct,
    read_capped,
)
from fivespot.compiler.diagnostics import Diagnostic, Location, cut, field_path, quoted, yaml_error
from fivespot.compiler.folders import leaves, walk
from fivespot.compiler.kubectlyaml import NotSendable, as_sent
from fivespot.compiler.kubectlyaml import loader as kubectl_loader
from fivespot.compiler.spec import CONFIG_API_VERSION, DOCUMENT_KINDS

Path_ = tuple[str | int, ...]

# libyaml's parser when present: the same nodes and marks, several times faster.
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class SourceDocument:
    """One YAML document: its data and where each field of it came from."""

    file: str
    index: int
    data: Any
    positions: dict[Path_, Location]
    raw: dict[Path_, str] = field(default_factory=dict)

    def locate(self, path: Iterable[str | int]) -> Location:
        """The position of the deepest known prefix of `path`."""
        parts = tuple(path)
        while parts and parts not in self.positions:
            parts = parts[:-1]
        return self.positions[parts]


@dataclass
class LoadedDocument:
    source: SourceDocument
    model: Any

    @property
    def kind(self) -> str:
        return str(self.model.kind)

    @property
    def name(self) -> str:
        return str(self.model.metadata.name)


@dataclass
class LoadResult:
    documents: list[LoadedDocument] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    invalid_kinds: set[str] = field(default_factory=set)
    """Kinds of documents that were recognised but failed validation."""
    unidentified: int = 0
    """Documents (or files) whose kind could not even be read: unparseable YAML, not a mapping,
    a foreign apiVersion, an unknown kind. Any of them might have been the missing Platform."""
    root: str = "."


CONFIG_SUFFIXES = (".yaml", ".yml")


def load_repo(config_dir: Path) -> LoadResult:
    result = LoadResult(root=str(config_dir))
    if not config_dir.is_dir():
        result.diagnostics.append(Diagnostic(
            Location(str(config_dir), 0, 0), "",
            "config folder does not exist" if not config_dir.exists()
            else "is a file; give the folder that holds the config repo's YAML files"))
        result.unidentified += 1
        return result
    found = walk(config_dir, CONFIG_SUFFIXES)  # the folder is a boundary: `fivespot.compiler.folders`
    for link in found.leaving:  # any might have held the Platform
        result.unidentified += 1
        result.diagnostics.append(leaves(link.relative_to(config_dir).as_posix(), config_dir))
    files = sorted(found.files, key=lambda p: p.relative_to(config_dir).as_posix())
    if not files and not found.leaving:
        result.diagnostics.append(Diagnostic(
            Location(str(config_dir), 0, 0), "", "no *.yaml or *.yml files in the config folder"))
        result.unidentified += 1
    for path in files:
        shown = path.relative_to(config_dir).as_posix()
        try:
            data = read_capped(path)
        except (OSError, FileTooLarge) as error:
            reason = (str(error) if isinstance(error, FileTooLarge)
                      else f"cannot read: {error.strerror or error}")
            result.unidentified += 1
            result.diagnostics.append(Diagnostic(Location(shown, 0, 0), "", reason))
            continue
        text = data.decode("utf-8", errors="replace")
        load_text(text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text,
                  shown, result)
    return result


def load_text(text: str, file: str, result: LoadResult) -> None:
    """Parse one file's documents into `result`."""
    loader: yaml.SafeLoader | None = None
    sent: _KubectlPass | None = None
    budget = Budget()  # the file's documents together
    try:
        loader = _Loader(text)
        index = 0
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            if _is_empty(node):  # `---` with nothing after it (a trailing one, say), as kubectl
                continue         # skips it; an empty file holds no document at all
            document = SourceDocument(file, index, None, {})
            check_bounds(node, budget)
            _walk(node, (), file, document, result.diagnostics)
            document.data = construct(loader, node)
            if _is_fixture(document.data):
                sent = _KubectlPass(text) if sent is None else sent
                _type_as_kubectl(document, sent.document(index), result.diagnostics)
            index += 1
            model = _validate(document, result)
            if model is not None:
                result.documents.append(LoadedDocument(document, model))
    except yaml.MarkedYAMLError as error:
        result.unidentified += 1
        mark = error.problem_mark or error.context_mark
        hint = _tab_hint(text, mark.line) if mark else ""
        result.diagnostics.append(yaml_error(file, error, hint=hint))
    except yaml.YAMLError as error:
        result.unidentified += 1
        result.diagnostics.append(Diagnostic(Location(file, 0, 0), "", f"invalid YAML: {' '.join(str(error).split())}"))
    except YamlTooLarge as error:
        result.unidentified += 1
        result.diagnostics.append(Diagnostic(Location(file, error.line, error.column), "",
                                             f"refused: {error}"))
    except RecursionError:  # pure-Python PyYAML, without libyaml, recurses per nesting level
        result.unidentified += 1
        result.diagnostics.append(Diagnostic(Location(file, 0, 0), "",
                                             f"refused: nested more than {MAX_DEPTH} levels deep"))
    finally:
        if loader is not None:
            loader.dispose()
        if sent is not None:
            sent.dispose()


def _is_fixture(data: Any) -> bool:
    return isinstance(data, dict) and data.get("kind") == "Fixture" and isinstance(
        data.get("spec"), dict)


class _KubectlPass:
    """The file's documents as kubectl reads a manifest (`kubectlyaml`: go-yaml's typing): what
    a Fixture's objects are, since they stand for manifests, whose numbers, `y`/`n` and merges
    kubectl reads otherwise than YAML 1.1. A second reader of the same text, composed only as
    far as the Fixture the config reader has reached (which has read and bounded every document
    up to it), each document it constructs bounded again first, within the file's budget."""

    def __init__(self, text: str) -> None:
        self.reader = kubectl_loader()(text)
        self.budget = Budget()
        self.composed = 0  # non-empty documents so far
        self.failed = False

    def document(self, index: int) -> Any:
        """The `index`-th non-empty document's value, the NotSendable that refuses it, or None
        when this reader cannot read it (the config reader has reported why); raises
        YamlTooLarge."""
        if self.failed:
            return None
        try:
            while self.reader.check_node():
                node = self.reader.get_node()
                if node is None or _is_empty(node):
                    continue
                self.composed += 1
                if self.composed - 1 < index:
                    continue
                check_bounds(node, self.budget)
                try:
                    return construct(self.reader, node)
                except NotSendable as error:
                    return error
        except yaml.YAMLError:
            self.failed = True
        return None

    def dispose(self) -> None:
        self.reader.dispose()


def _type_as_kubectl(document: SourceDocument, sent: Any, diagnostics: list[Diagnostic]) -> None:
    """A Fixture's object and old object as kubectl sends them (the rest as config is read)."""
    spec = document.data["spec"]
    for key in ("object", "oldObject"):
        if key not in spec:
            continue
        where = ("spec", key)
        try:
            if isinstance(sent, NotSendable):
                raise sent
            spec[key] = as_sent((sent or {}).get("spec", {}).get(key, spec[key]), f"spec.{key}")
        except NotSendable as error:
            located = (Location(document.file, error.line, error.column) if error.line
                       else document.locate(where))
            diagnostics.append(Diagnostic(located, error.field or f"spec.{key}", str(error)))
            return


def _is_empty(node: yaml.Node) -> bool:
    """A document with no content: an empty plain scalar (what `---` alone composes to)."""
    return isinstance(node, yaml.ScalarNode) and node.value == "" and node.style in (None, "")


def _tab_hint(text: str, line: int) -> str:
    lines = text.splitlines()
    return " (indent YAML with spaces, not tabs)" if line < len(lines) and "\t" in lines[line] else ""


def _location(node: yaml.Node, file: str) -> Location:
    return Location(file, node.start_mark.line + 1, node.start_mark.column + 1)


def _walk(node: yaml.Node, path: Path_, file: str, document: SourceDocument,
          diagnostics: list[Diagnostic]) -> None:
    positions = document.positions
    positions.setdefault(path, _location(node, file))
    if isinstance(node, yaml.ScalarNode):
        document.raw[path] = str(node.value)
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, Location] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            here = _location(key_node, file)
            if key in seen:
                diagnostics.append(Diagnostic(
                    here, field_path(path + (key,)),
                    f"duplicate key (first set at line {seen[key].line}); YAML keeps only the last"))
            seen[key] = here
            positions[path + (key,)] = here
            _walk(value_node, path + (key,), file, document, diagnostics)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, path + (index,), file, document, diagnostics)


def _validate(document: SourceDocument, result: LoadResult) -> BaseModel | None:
    diagnostics = result.diagnostics
    data = document.data
    here = document.locate(())
    if not isinstance(data, dict):
        result.unidentified += 1
        diagnostics.append(Diagnostic(here, "", f"expected a mapping with apiVersion and kind, "
                                                f"got {_describe(data)}"))
        return None
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if api_version != CONFIG_API_VERSION:
        result.unidentified += 1
        diagnostics.append(Diagnostic(
            document.locate(("apiVersion",)), "apiVersion",
            f"expected {CONFIG_API_VERSION}, got {quoted(api_version)}; only config kinds "
            f"({', '.join(DOCUMENT_KINDS)}) belong in the config folder"))
        return None
    model_type = DOCUMENT_KINDS.get(str(kind))
    if model_type is None:
        result.unidentified += 1
        diagnostics.append(Diagnostic(
            document.locate(("kind",)), "kind",
            (f"unknown kind {quoted(kind)}" if kind is not None else "kind is missing")
            + f"; expected one of {', '.join(DOCUMENT_KINDS)}"
            + _suggest(str(kind), DOCUMENT_KINDS)))
        return None
    try:
        return model_type.model_validate(data)
    except ValidationError as error:
        result.invalid_kinds.add(str(kind))
        for detail in error.errors(include_url=False):
            loc = tuple(detail["loc"])
            diagnostics.append(Diagnostic(
                document.locate(loc), field_path(loc),
                _explain(detail, model_type, loc, document.raw.get(loc))))
        return None


def _describe(value: Any) -> str:
    if value is None:
        return "nothing"
    name = type(value).__name__
    article = "an" if name[0] in "aeiou" else "a"
    if isinstance(value, (dict, list)):
        return f"{article} {name}"
    return f"{article} {name} ({quoted(value)})"


def _suggest(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _explain(detail: Any, model_type: type[BaseModel], loc: Path_, raw: str | None) -> str:
    kind = detail["type"]
    message = str(detail["msg"]).removeprefix("Value error, ")
    value = detail.get("input")
    if kind == "extra_forbidden":
        valid = _fields_at(model_type, loc[:-1])
        return (f"unknown field; valid fields here: {', '.join(valid)}"
                + _suggest(str(loc[-1]), valid))
    if kind == "missing":
        return "required field is missing"
    if kind == "string_type" and isinstance(value, (int, float, bool)):
        return (f"expected a string, got {_describe(value)}; quote it: "
                f"\"{cut(raw if raw is not None else str(value))}\"")
    if kind == "int_type" and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return (f"expected an integer, got a str ({quoted(value)}); remove the quotes: "
                f"{cut(value.strip())}")
    if kind == "bool_type" and isinstance(value, str):
        return f"expected true or false, got a str ({quoted(value)})"
    if kind in ("dict_type", "model_type"):
        return f"expected a mapping, got {_describe(value)}"
    if kind in ("int_type", "int_parsing", "bool_type", "bool_parsing", "float_type", "list_type",
                "string_type"):
        return f"{message}, got {_describe(value)}"
    if kind == "literal_error" and loc and loc[-1] == "kind":
        return message
    return message


def _fields_at(model_type: type[BaseModel], loc: Path_) -> list[str]:
    """The field names (as written in YAML) of the model reached by following `loc`."""
    current: Any = model_type
    for part in loc:
        if isinstance(part, int) or not (isinstance(current, type) and issubclass(current, BaseModel)):
            current = _inner_model(current)
            if isinstance(part, int):
                continue
        fields = {f.alias or n: f for n, f in current.model_fields.items()}
        info = fields.get(str(part))
        if info is None:
            return []
        current = _inner_model(info.annotation)
    current = _inner_model(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return sorted(f.alias or n for n, f in current.model_fields.items())
    return []


def _inner_model(annotation: Any) -> Any:
    """The BaseModel inside `X`, `X | None` or `list[X]`, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None
