"""Limits on a composed YAML document, checked before it is turned into Python values.

A config repo or an object file comes from a pull request, so its YAML must not be able to stall
or crash the CI job that reads it. Three things could, and are refused here with the line they
start on: aliases that refer to aliases (a "billion laughs" document of a few hundred bytes that
expands to billions of values for every walk over it), nesting deep enough to exhaust Python's
recursion, and an integer longer than Python will convert (`sys.get_int_max_str_digits()`).
The check walks the node graph without recursion and stops at the first limit it meets.
`construct` builds the Python values, turning a scalar its tag cannot hold into a YAML error.
PyYAML is imported when a document is first composed: `fivespot check` reads most object files
without it (`objectyaml`'s fast path), and its import is a tenth of a short run.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import yaml

MAX_VALUES: Final = 100_000
"""Values in one document, counting each use of an alias in full: far above any real config
(the bundled example's largest document has about 300)."""
MAX_DEPTH: Final = 100
"""Nesting levels in one document (a CRD schema rarely needs 20)."""
_INT_TAG: Final = "tag:yaml.org,2002:int"


class YamlTooLarge(ValueError):
    """A document exceeds a limit; `mark` is where the offending node starts."""

    def __init__(self, mark: yaml.Mark, message: str) -> None:
        super().__init__(message)
        self.line, self.column = mark.line + 1, mark.column + 1


def check_bounds(root: yaml.Node) -> None:
    """Raise YamlTooLarge if the document under `root` exceeds a limit."""
    import yaml

    digits = sys.get_int_max_str_digits() or None
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    values = 0
    while stack:
        node, depth = stack.pop()
        values += 1
        if values > MAX_VALUES:
            raise YamlTooLarge(root.start_mark,
                               f"the document expands to more than {MAX_VALUES:,} values "
                               "(aliases that refer to aliases?)")
        if depth > MAX_DEPTH:
            raise YamlTooLarge(node.start_mark, f"nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, yaml.ScalarNode):
            if digits and node.tag == _INT_TAG and len(node.value) > digits:
                raise YamlTooLarge(node.start_mark,
                                   f"an integer of {len(node.value):,} digits; at most {digits:,}")
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, depth + 1) for item in node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))


def construct(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    """`loader.construct_document(node)`, with a scalar its tag cannot hold (`!!float timeout`)
    raised as the YAML error it is, at the document's start, rather than as a bare ValueError."""
    import yaml

    try:
        return loader.construct_document(node)
    except ValueError as error:
        raise yaml.MarkedYAMLError(problem=f"{error}", problem_mark=node.start_mark) from None
