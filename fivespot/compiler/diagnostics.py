"""Errors a person can act on: `FILE:LINE:COL: field.path: message`.

Every problem in a config repo is reported in this one shape, all of them in one run, so a CI
log reads like a compiler's and an editor can jump to each line.
"""

from __future__ import annotations

from typing import Any, Final, Sequence

from msgspec import Struct


class Location(Struct, frozen=True, order=True):
    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class Diagnostic(Struct, frozen=True, order=True):
    location: Location
    field: str
    message: str

    def __str__(self) -> str:
        field = f" {self.field}:" if self.field else ""
        return f"{self.location}:{field} {self.message}"


class CompileError(Exception):
    """One or more diagnostics; the compiler raises it after collecting everything it found."""

    def __init__(self, diagnostics: Sequence[Diagnostic]):
        self.diagnostics = sorted(set(diagnostics))
        super().__init__("\n".join(str(d) for d in self.diagnostics))


class InputError(Exception):
    """Bad input to `check` or `test` (nothing was checked): the diagnostics say where and why."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(str(d) for d in self.diagnostics))


QUOTED_LENGTH: Final = 80
"""The most of a value a diagnostic quotes: enough to recognise it, never a whole file."""


def cut(text: str) -> str:
    """`text`, cut to QUOTED_LENGTH characters (`...` at the end when cut)."""
    return text if len(text) <= QUOTED_LENGTH else text[:QUOTED_LENGTH - 3] + "..."


def quoted(value: Any) -> str:
    """`repr(value)`, cut to QUOTED_LENGTH characters."""
    return cut(repr(value))


def field_path(parts: Sequence[str | int]) -> str:
    """('spec', 'paths', 0, 'x') -> 'spec.paths[0].x'."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


def yaml_error(file: str, error: Any, offset: int = 0, hint: str = "") -> Diagnostic:
    """A PyYAML `MarkedYAMLError` as a diagnostic. Where the problem is, and what was being read
    when it was found if that started on another line; when the problem is only the end of the
    stream (a quote left open), where that started: the line to fix."""
    problem, context = error.problem or str(error), error.context
    mark, started = error.problem_mark or error.context_mark, error.context_mark
    if context and started is not None and mark is not None and started.line != mark.line:
        if "end of stream" in problem:
            mark, problem = started, f"{problem} ({context} that starts here)"
        else:
            problem = f"{problem} ({context} started at line {started.line + 1 + offset}, column {started.column + 1})"
    where = Location(file, mark.line + 1 + offset, mark.column + 1) if mark else Location(file, 0, 0)
    return Diagnostic(where, "", f"invalid YAML: {problem}{hint}")
