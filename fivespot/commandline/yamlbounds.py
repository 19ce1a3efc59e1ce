"""Limits on the files and YAML a command reads, checked before anything is turned into Python
values.

A config repo, an object file or a compiled output comes from a pull request, so reading it must
not be able to stall or crash the CI job that reads it. A file over `MAX_FILE_BYTES` is refused
before it is read (`read_capped`). In a composed document, four things could, and are refused
with the line the document (or node) starts on: aliases that refer to aliases or merge keys that
merge a mapping twice (a "billion laughs" or a merge bomb of a few hundred bytes that expands to
billions of values for every walk over it), many documents of one file each expanding almost as
far (one file's aliases share one `Budget`), nesting deep enough to exhaust Python's recursion,
and an integer longer than Python will convert (`sys.get_int_max_str_digits()`). The check walks
the node graph without recursion and stops at the first limit it meets, so its cost is bounded
by the limits, not by what the document would expand to; what is constructed after it is bounded
by the same count (a merge copies at most the values it was counted for).
`construct` builds the Python values, turning a scalar its tag cannot hold into a YAML error.
`load_all` is `yaml.safe_load_all` with these bounds, for readers with no positions to keep.

Here rather than in the compiler because `fivespot install` (deploy) reads compiled output too,
and the layers let every package import `commandline`. PyYAML is imported when a document is
first composed: `fivespot check` reads most object files without it (`objectyaml`'s fast path),
and its import is a tenth of a short run.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import yaml

MAX_FILE_BYTES: Final = 10 * 1024 * 1024
"""The largest file any command reads (10 MiB): a config repo's largest file is a few KB, and
10,000 objects for `fivespot check` take less than half of it."""
MAX_VALUES: Final = 100_000
"""Values in one document, counting each use of an alias in full (and each mapping a merge key
merges): far above any real config (the bundled example's largest document has about 300)."""
MAX_ALIASED_VALUES: Final = 100_000
"""Values reached through aliases (merge keys included) in one file, its documents together:
without it, a file of many documents could each expand almost to `MAX_VALUES`."""
MAX_DEPTH: Final = 100
"""Nesting levels in one document (a CRD schema rarely needs 20)."""
_INT_TAG: Final = "tag:yaml.org,2002:int"


class YamlTooLarge(ValueError):
    """A document exceeds a limit; `line` and `column` (1-based) are where the offending node
    starts (0 when unknown)."""

    def __init__(self, mark: yaml.Mark | None, message: str) -> None:
        super().__init__(message)
        self.line, self.column = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)


class FileTooLarge(ValueError):
    """A file over `MAX_FILE_BYTES`, refused before it was read (`size`: its size, when a
    regular file says it; None for a stream, of which one byte more than the limit was read)."""

    def __init__(self, size: int | None) -> None:
        self.size = size
        how_large = f"{size:,} bytes" if size is not None else "more bytes than that"
        super().__init__(f"refused, not read: {how_large}; fivespot reads files of at most "
                         f"{MAX_FILE_BYTES // (1024 * 1024)} MiB ({MAX_FILE_BYTES:,} bytes)")


def read_capped(path: Path | str) -> bytes:
    """A file's bytes; raises FileTooLarge without reading a regular file its size says is over
    the limit, or after reading one byte over it from anything else (a pipe, `<(...)`), and
    OSError as `open` does."""
    with open(path, "rb") as stream:
        status = os.fstat(stream.fileno())
        if stat.S_ISREG(status.st_mode) and status.st_size > MAX_FILE_BYTES:
            raise FileTooLarge(status.st_size)
        return read_stream_capped(stream)


def read_stream_capped(stream: IO[bytes]) -> bytes:
    """What is left of a stream, standard input say; raises FileTooLarge past the limit."""
    data = stream.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise FileTooLarge(None)
    return data


class Budget:
    """What one file's aliases have expanded to so far (`aliased` values), shared by the
    `check_bounds` of its documents."""

    __slots__ = ("aliased",)

    def __init__(self) -> None:
        self.aliased = 0


def check_bounds(root: yaml.Node, budget: Budget | None = None) -> None:
    """Raise YamlTooLarge if the document under `root` exceeds a limit, or takes the values its
    file's aliases reach (`budget`, when its other documents count too) past theirs.

    A node's first visit is its own; every later one, and all below it, is a use of an alias
    (a merge key's value is an alias too): counted against the file's budget."""
    import yaml

    digits = sys.get_int_max_str_digits() or None
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    seen: set[int] = set()
    values = 0
    aliased = budget.aliased if budget is not None else 0
    try:
        while stack:
            node, depth, again = stack.pop()
            values += 1
            if values > MAX_VALUES:
                raise YamlTooLarge(root.start_mark,
                                   f"the document expands to more than {MAX_VALUES:,} values "
                                   "(aliases that refer to aliases?)")
            if depth > MAX_DEPTH:
                raise YamlTooLarge(node.start_mark, f"nested more than {MAX_DEPTH} levels deep")
            if not again:
                again = id(node) in seen
                seen.add(id(node))
            if again:
                aliased += 1
                if aliased > MAX_ALIASED_VALUES:
                    raise YamlTooLarge(root.start_mark,
                                       f"the file's aliases and merge keys expand to more than "
                                       f"{MAX_ALIASED_VALUES:,} values, its documents up to "
                                       "this one together")
            if isinstance(node, yaml.ScalarNode):
                if digits and node.tag == _INT_TAG and len(node.value) > digits:
                    raise YamlTooLarge(node.start_mark,
                                       f"an integer of {len(node.value):,} digits; at most "
                                       f"{digits:,}")
            elif isinstance(node, yaml.SequenceNode):
                stack.extend((item, depth + 1, again) for item in node.value)
            elif isinstance(node, yaml.MappingNode):
                for key, value in node.value:
                    stack.append((key, depth + 1, again))
                    stack.append((value, depth + 1, again))
    finally:
        if budget is not None:
            budget.aliased = aliased


def construct(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    """`loader.construct_document(node)`, with a scalar its tag cannot hold (`!!float timeout`)
    raised as the YAML error it is, at the document's start, rather than as a bare ValueError."""
    import yaml

    try:
        return loader.construct_document(node)
    except ValueError as error:
        raise yaml.MarkedYAMLError(problem=f"{error}", problem_mark=node.start_mark) from None


def load_all(text: str) -> list[Any]:
    """Every document of `text`, as `yaml.safe_load_all` reads them, each bounded before it is
    constructed; raises yaml.YAMLError or YamlTooLarge."""
    import yaml

    reader: yaml.SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    budget = Budget()
    documents = []
    try:
        while reader.check_node():
            node = reader.get_node()
            if node is None:
                continue
            check_bounds(node, budget)
            documents.append(construct(reader, node))
    except RecursionError:  # pure-Python PyYAML, without libyaml, recurses per nesting level
        raise YamlTooLarge(None, f"nested more than {MAX_DEPTH} levels deep") from None
    finally:
        reader.dispose()
    return documents
