"""Reading the YAML (or JSON) files `fivespot check` decides: documents as kubectl sends them
(`kubectlyaml`: go-yaml's typing, not YAML 1.1's), where they start, and the fields the API
server's strict decoder would find twice.

Every document keeps the line it starts on (each result names it) and, on demand, where its
fields are (for diagnostics). A decoded mapping has lost a key given twice, so the composed node
tree is walked once for those: `spec.enabled` given twice is what `fieldValidation=Strict` denies
as `duplicate field "spec.enabled"`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec
from msgspec import Struct

from fivespot.commandline.yamlbounds import (
    MAX_DEPTH,
    Budget,
    FileTooLarge,
    YamlTooLarge,
    check_bounds,
    construct,
    read_capped,
    read_stream_capped,
)
from fivespot.compiler.diagnostics import Diagnostic, InputError, Location, yaml_error
from fivespot.compiler.kubectlyaml import NotSendable, as_sent, loader, plain_scalar
from fivespot.policies.admission_eval.regex import Pattern

if TYPE_CHECKING:  # imported where the reference path first needs it (see `yamlbounds`)
    import yaml

_POSITION_DEPTH = 3
"""Field positions are kept for the first levels (apiVersion, kind, metadata.name, spec.x): what
diagnostics name."""


class Document(Struct, frozen=True):
    """One YAML document: its value, where it starts, where its fields are, and the fields it
    gives twice (as JSON paths)."""

    file: str
    data: Any
    line: int
    column: int = 1
    duplicates: tuple[str, ...] = ()
    _positions: Callable[[], Mapping[tuple[str, ...], Location]] | None = None

    def __eq__(self, other: object) -> bool:  # where fields sit is not part of the document
        return isinstance(other, Document) and (
            (self.file, self.data, self.line, self.column, self.duplicates)
            == (other.file, other.data, other.line, other.column, other.duplicates))

    def __hash__(self) -> int:
        return hash((self.file, self.line, self.column, self.duplicates))

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


STDIN: Final = "-"
"""The file name that means standard input, as for `kubectl apply -f -`."""


def read_file(path: Path, name: str) -> str:
    """A file's text (standard input's for `-`), its line ends made `\\n` as Python's text
    files make them; raises InputError naming it (`name`) when it cannot be read or is over
    the size limit (`yamlbounds.read_capped`: a larger file is not read)."""
    try:
        data = read_stream_capped(sys.stdin.buffer) if str(path) == STDIN else read_capped(path)
    except FileTooLarge as error:
        raise InputError([Diagnostic(Location(name, 0, 0), "", str(error))]) from None
    except FileNotFoundError:
        raise InputError([Diagnostic(Location(name, 0, 0), "", "cannot read: no such file")]) from None
    except OSError as error:
        reason = error.strerror or str(error)
        raise InputError([Diagnostic(Location(name, 0, 0), "", f"cannot read: {reason}")]) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        before = data[:error.start]
        line = before.count(b"\n") + 1
        column = len(before) - (before.rfind(b"\n") + 1) + 1
        raise InputError([Diagnostic(Location(name, line, column), "",
                                     f"not UTF-8: byte 0x{data[error.start]:02x} cannot start or "
                                     "continue a character here; save the file as UTF-8, as "
                                     "kubectl reads it")]) from None
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def read_documents(path: Path, shown: str | None = None) -> list[Document]:
    """Every non-empty document of a YAML (or JSON) file; raises InputError."""
    name = shown or str(path)
    return read_text(read_file(path, name), name)


def read_text(text: str, name: str) -> list[Document]:
    """Every non-empty document of `text`: each read by the fast path when it gives exactly the
    reference path's value (`parse_documents`), else by the reference path; a JSON stream as
    kubectl reads one (`read_json`)."""
    if is_json(text):
        return read_json(text, name)
    parts = split_text(text)
    if parts is None:
        return parse_documents(text, name)
    return read_parts(text, name, parts)


def is_json(text: str) -> bool:
    """Whether kubectl reads `text` as JSON: its first non-blank character opens an object (its
    YAML-or-JSON decoder looks only at that, so flow-style YAML there is an error to it too)."""
    return text.lstrip(" \t\r\n\ufeff")[:1] == "{"


def read_json(text: str, name: str) -> list[Document]:
    """The values of a JSON stream (objects one after another, any white space between, tabs
    too, which YAML would refuse), with the line each starts on; raises InputError. Numbers
    become what kubectl sends (`as_sent`); JSON's own NaN and Infinity are refused as Go refuses
    them, and a key given twice keeps its last value, as kubectl keeps it."""
    import json

    def refuse(constant: str) -> Any:
        raise ValueError(f"invalid character '{constant[0]}' looking for beginning of value")

    decoder = json.JSONDecoder(parse_constant=refuse)
    documents: list[Document] = []
    position = 0
    counted, lines = 0, 1  # lines counted up to offset `counted`: each stretch once, not O(n^2)
    while True:
        while position < len(text) and text[position] in " \t\r\n\ufeff":
            position += 1
        if position >= len(text):
            return documents
        lines += text.count("\n", counted, position)
        counted = position
        line = lines
        column = position - text.rfind("\n", 0, position)
        try:
            value, position = decoder.raw_decode(text, position)
        except ValueError as error:
            where = getattr(error, "pos", position)
            raise InputError([Diagnostic(
                Location(name, text.count("\n", 0, where) + 1, where - text.rfind("\n", 0, where)),
                "", f"invalid JSON: {getattr(error, 'msg', error)}")]) from None
        try:
            value = as_sent(value)
        except NotSendable as sent:
            raise InputError([Diagnostic(Location(name, line, column), sent.field,
                                         str(sent))]) from None
        documents.append(Document(name, value, line, column))


Part = tuple[int, int, int]
"""One `---`-separated part of a stream: its (start, end) offsets and the line it starts on."""


def split_text(text: str) -> list[Part] | None:
    """The parts of `text`, found with a few whole-text scans (cheap), so they can be read
    apart, in any process (`read_parts`); None when the stream must be read whole by the
    reference path."""
    if (is_json(text) or text.startswith(("%", "...")) or "\n%" in text or "\n..." in text
            or any(brk in text for brk in _OTHER_LINE_BREAKS)):
        # directives belong to the document after them; what may follow a document end depends
        # on what came before; YAML 1.1 counts more line breaks than "\n": the reference path
        # reads such a stream whole
        return None
    bounds = _markers(text)
    if not bounds or bounds[0] != 0:
        bounds.insert(0, 0)
    bounds.append(len(text))
    parts: list[Part] = []
    line, previous = 1, 0
    for start, end in zip(bounds, bounds[1:]):
        line += text.count("\n", previous, start)
        previous = start
        parts.append((start, end, line))
    return parts


def _markers(text: str) -> list[int]:
    """Where each line starting with a document marker (`---` then a blank or the line's end)
    starts: `^---(?=[ \t]|$)` in multi-line mode, found with `str.find` (a tenth of the
    time)."""
    found = [0] if text.startswith("---") and text[3:4] in ("", " ", "\t", "\n") else []
    position = text.find("\n---")
    while position >= 0:
        if text[position + 4:position + 5] in ("", " ", "\t", "\n"):
            found.append(position + 1)
        position = text.find("\n---", position + 1)
    return found


def read_parts(text: str, name: str, parts: Iterable[Part]) -> list[Document]:
    """The documents of these parts of `text` (from `split_text`), in order; raises InputError."""
    return [document for documents in read_each_part(text, name, parts) for document in documents]


def read_each_part(text: str, name: str, parts: Iterable[Part]) -> list[list[Document]]:
    """The documents of each of these parts of `text`, part by part (stderr silenced once for
    them all: a `fivespot check` worker reads hundreds of one-document parts); raises InputError."""
    found = []
    rapid = _Rapid()
    budget = Budget()  # the parts' aliases together
    with _silenced_stderr():
        for start, end, line in parts:
            chunk = text[start:end]
            found.append(_read_chunk(chunk, name, line, budget,
                                     None if _needs_reference(chunk, start == 0) else rapid))
    return found


def _needs_reference(chunk: str, at_start: bool) -> bool:
    """Whether the fast path might read this part of a stream differently (`at_start`: it is
    the stream's first). Every other part starts with its `---` line, so no pattern's match
    reaches across from the part before: scanning the parts one by one marks exactly the
    parts a scan of the whole text would."""
    if at_start and chunk[:1] in "-+.~0123456789":  # the one place a token has no character before it
        return True
    if _RISKY_OR_WORDS.search(chunk):
        return True
    return not all(_same_either_way(token) for token in set(_TOKEN.findall(chunk)))


@contextlib.contextmanager
def _silenced_stderr() -> Iterator[None]:
    """File descriptor 2 sent to /dev/null while the fast path reads: rapidyaml prints its own
    diagnostic (`line=2 col=1 (8B): ERROR: [parse] ...` and its source path) there before it
    raises, and its Python binding has no way to set the error handler. Such a document is read
    again by the reference path, which words the error; nothing else writes to stderr meanwhile.
    Once per file: a few system calls."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no stderr at all: nothing to keep quiet
        yield
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 2)
        finally:
            os.close(devnull)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _read_chunk(chunk: str, name: str, line: int, budget: Budget,
                rapid: _Rapid | None) -> list[Document]:
    """The document of one `---`-separated part of a stream, starting on `line` (read by the
    fast path with `rapid`, by the reference path without, within its file's `budget`)."""
    body, first_line = chunk, line
    if chunk.startswith("---"):
        head, _, rest = chunk.partition("\n")
        after = head[3:].strip(" \t\r")  # YAML's white space; str.strip also takes U+00A0
        if after and not after.startswith("#"):  # content on the marker's line
            return parse_documents(chunk, name, line, budget)
        body, first_line = rest, line + 1
    start = _content_start(body)
    if start is None:
        return []
    read, value = (False, None) if rapid is None else _fast_value(body, rapid)
    if not read:
        return parse_documents(body, name, first_line, budget)
    if value is None:
        return []
    return [Document(name, value, first_line + start[0], start[1], (),
                     _ReferencePositions(body, name, first_line))]


def _content_start(body: str) -> tuple[int, int] | None:
    """(line offset, column) of the first line that is neither blank nor a comment."""
    offset = position = 0
    while position < len(body):
        end = body.find("\n", position)
        end = len(body) if end < 0 else end
        stripped = body[position:end].lstrip(" ")
        if stripped and not stripped.startswith("#"):
            return offset, end - position - len(stripped) + 1
        offset, position = offset + 1, end + 1
    return None


class _ReferencePositions:
    """Field positions of a fast-read document, found by the reference path when first asked."""

    __slots__ = ("body", "found", "line", "name")

    def __init__(self, body: str, name: str, line: int) -> None:
        self.body, self.name, self.line = body, name, line
        self.found: Mapping[tuple[str, ...], Location] | None = None

    def __call__(self) -> Mapping[tuple[str, ...], Location]:
        if self.found is None:
            try:
                documents = parse_documents(self.body, self.name, self.line)
            except InputError:
                documents = []
            first = documents[0] if documents else None
            self.found = (first._positions() if first is not None and first._positions is not None
                          else {})
        return self.found


def parse_documents(text: str, name: str, first_line: int = 1,
                    budget: Budget | None = None) -> list[Document]:
    """Every non-empty document of `text` (whose first line is line `first_line` of `name`;
    `budget`: its file's, when `text` is part of one)."""
    import yaml

    reader: yaml.SafeLoader | None = None
    documents = []
    offset = first_line - 1
    budget = budget or Budget()
    try:
        reader = loader()(text)
        while reader.check_node():
            node = reader.get_node()
            if node is None:
                continue
            check_bounds(node, budget)
            duplicates: list[str] = []
            _duplicates(node, "", duplicates)
            try:
                data = as_sent(construct(reader, node))
            except NotSendable as error:
                line, column = ((error.line, error.column) if error.line else
                                (node.start_mark.line + 1, node.start_mark.column + 1))
                raise InputError([Diagnostic(Location(name, line + offset, column), error.field,
                                             str(error))]) from None
            if data is not None:
                positions: dict[tuple[str, ...], Location] = {}
                _positions(node, (), name, offset, positions)
                documents.append(Document(name, data, node.start_mark.line + 1 + offset,
                                          node.start_mark.column + 1, tuple(duplicates),
                                          _known(positions)))
    except yaml.MarkedYAMLError as error:
        raise InputError([yaml_error(name, error, offset)]) from None
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
        if reader is not None:
            reader.dispose()
    return documents


def _known(positions: Mapping[tuple[str, ...], Location]
           ) -> Callable[[], Mapping[tuple[str, ...], Location]]:
    return lambda: positions


def _positions(node: yaml.Node, path: tuple[str, ...], file: str, offset: int,
               positions: dict[tuple[str, ...], Location]) -> None:
    import yaml

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
    import yaml

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


# --- the fast path ---------------------------------------------------------------------------------
#
# The reference path (libyaml through PyYAML, typed as kubectl types: `kubectlyaml`) composes in
# C but resolves and constructs every value in Python: ~85% of `fivespot check`'s time on a large
# file. rapidyaml parses and writes JSON in C++, and msgspec decodes it in C, a tenth of the time.
# The two agree on YAML's structure; where their scalar typing differs (go-yaml's `y`, `on`, `~`,
# `0777`, `.5`, `1e3`, `1.0`, numeric keys, ...) or rapidyaml's JSON would not carry a value
# exactly (anchors, tags, escapes, block scalars), the document is read by the reference path
# instead: the fast path is taken only where it gives the same value, and a document it cannot
# read is read by the reference path, which reports the error with its position. Positions are
# found by the reference path too, on demand, for the few documents a diagnostic points into.

_OTHER_LINE_BREAKS: Final = ("\r", "\x85", "\u2028", "\u2029")
_RISKY: Final = (
    r"[\\\x{0}-\x{9}\x{b}-\x{1f}\x{7f}-\x{9f}\x{2028}\x{2029}\x{d800}-\x{dfff}\x{feff}"
    r"\x{fffe}\x{ffff}]|<<|(?:^|[\s\[\{,])[&*!]|(?:^|\s)\?(?:\s|$)"
    r"|(?:^|[\s:\-,\[])[|>][-+0-9]*[ \t]*(?:#.*)?$|^[ \t]*:(?:[ \t]|$)|^ {100,}")
"""Escapes, control characters (tabs, CRs), YAML 1.1's other line breaks, a BOM, merge keys,
anchors, aliases, tags, complex keys, block scalars, empty keys, deep indentation: a document
with any is read by the reference path."""
_WORDS: Final = (
    "(?:^|[\\s\\[\\{,])(?:(?:[Yy]es|YES|[Nn]o|NO|[Oo]n|ON|[Oo]ff|OFF|True|TRUE|False|FALSE"
    "|Null|NULL|~|[YyNn]):?|(?:true|false|null):)(?:[\\s,\\]\\}]|$)")
"""go-yaml's bools and nulls (YAML 1.1's, and `y`/`n`) that rapidyaml's JSON calls strings, and
`true:`-style keys."""
_RISKY_OR_WORDS: Final = Pattern(f"(?m){_RISKY}|{_WORDS}")
"""Either, in one RE2 pass (`Pattern`: RE2 without the public API's per-call overhead)."""
_TOKEN: Final = re.compile(r"[\s\[\{,]([-+.~0-9][^\s,\[\]\{\}#]*)")
"""Plain scalars that start like a number: kubectl and rapidyaml may type them differently."""
_JSON_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
_NOT_NUMERIC: Final = re.compile(r"[g-np-wyzG-NP-WYZ]")
_WORDLIKE: Final = re.compile(r"[0-9][^:\s]*[g-np-su-wyG-NP-SU-WY][^:\s]*")
"""A scalar starting with a digit and holding a letter that none of go-yaml's implicit forms
starting with a digit has (ints: `b`, `o`, `x`, hex digits; floats: `e`; timestamps, which stay
strings anyway: `t`, `T`, `Z`): a string to kubectl without asking its resolver, as `15m`,
`1h30m`, `5spot.finos.org/v1` are (`test_object_yaml` holds it to `kubectlyaml.plain_scalar`)."""


@functools.lru_cache(maxsize=4096)
def _same_either_way(token: str) -> bool:
    """Whether kubectl (`kubectlyaml`) and rapidyaml+msgspec give this plain scalar the same
    value."""
    if token in ("-", "---"):  # a sequence entry, a document marker
        return True
    key = token.endswith(":")
    text = token[:-1] if key else token
    if not key and _JSON_NUMBER.fullmatch(text):
        # the same int or float, unless kubectl sends another: `1.0` as 1, an integer past
        # uint64 as a float
        if "." not in text and len(text) > 20:  # past uint64 (and maybe past int()'s limit)
            return False
        fast = float(text) if "." in text else int(text)
        try:
            sent = as_sent(plain_scalar(text))
        except NotSendable:
            return False
        return type(sent) is type(fast) and sent == fast
    # a string to kubectl that no reader takes for a number (`15m`, `-node`)
    if _NOT_NUMERIC.search(text) is None:
        return False
    return _WORDLIKE.fullmatch(text) is not None or isinstance(plain_scalar(text), str)


_decode_json: Final = msgspec.json.Decoder().decode
_encode_json: Final = msgspec.json.Encoder().encode


class _Rapid:
    """One rapidyaml tree and one output buffer, used again for each document a read reads: a
    new tree and a new JSON string for each would cost a third of the fast path. A read's own
    (never shared between threads); the value decoded from the buffer is a copy."""

    __slots__ = ("buffer", "emit", "parse", "tree")

    def __init__(self) -> None:
        import ryml  # by the first read, not with the module (commands that read no objects)

        self.tree = ryml.Tree()
        self.buffer = bytearray(1 << 14)
        self.parse, self.emit = ryml.parse_csubstr, ryml.emit_json_to_substr

    def json(self, body: bytes) -> int:
        """`body` parsed and written as JSON into `buffer`; how many bytes of it."""
        tree = self.tree
        tree.clear()
        tree.clear_arena()
        self.parse(body, tree)
        failed, size = self.emit(tree, tree.root_id(), self.buffer)
        if failed:
            self.buffer = bytearray(2 * size)
            failed, size = self.emit(tree, tree.root_id(), self.buffer)
        return int(size)


def _colons(value: Any) -> int:
    """The colons in the decoded value's compact JSON: one after each key, and those in its
    strings (-1 when it holds an integer msgspec cannot write)."""
    try:
        return _encode_json(value).count(b":")
    except (msgspec.EncodeError, OverflowError):
        return -1


def _decoded(emitted: memoryview, colons: int) -> tuple[bool, Any]:
    """(True, value) of rapidyaml's JSON, which has `colons` colons, or (False, None) when a
    mapping in it gives a key twice (decoding keeps one: the reference path names the
    duplicate) or a number out of range.

    Rapidyaml's JSON has a colon after each key it gives and those in its strings; a key given
    twice is written twice but kept once, so the value written again has fewer colons — at
    least one per key lost, whatever the strings hold (a lost key's own and its value's colons
    go with it, and the key kept was written too)."""
    try:
        value = _decode_json(emitted)
    except msgspec.DecodeError:
        return False, None
    if value.__class__ in (dict, list) and _colons(value) != colons:
        return False, None
    return True, value


def _fast_value(body: str, rapid: _Rapid) -> tuple[bool, Any]:
    """(True, value) when the fast path reads `body` exactly, else (False, None)."""
    if body.count("[") + body.count("{") > MAX_DEPTH:  # nesting the reference path may refuse
        return False, None
    try:
        size = rapid.json(body.encode())
    except RecursionError:
        return False, None
    except Exception:  # noqa: BLE001 - rapidyaml's parse errors: the reference path words them
        return False, None
    with memoryview(rapid.buffer) as whole, whole[:size] as emitted:
        return _decoded(emitted, rapid.buffer.count(b":", 0, size))
