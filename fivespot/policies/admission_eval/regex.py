"""RE2 matching for the evaluator: RE2 semantics like the API server's Go regexp, made fast.

Shared by the schema checks (`pattern`, `self.matches` rules) and the format checks, so every
regular expression the checker runs behaves the same way, including on strings holding lone
surrogates (which YAML can produce and Go would have turned into U+FFFD): those never crash.
"""

from __future__ import annotations

from typing import Final

import re2

from fivespot.policies import memo


class Pattern:
    """An RE2 pattern with a fast, allocation-light `search`.

    The public `re2` API decodes match offsets back to characters in Python (~25 µs a call);
    a schema pattern only needs "does it match anywhere", which the underlying RE2 object
    answers in about a microsecond. It is compiled with `never_capture` (every group
    non-capturing: the same language, and RE2 need not track submatches), and the text is
    encoded strictly unless it holds lone surrogates. Semantics are RE2's either way.
    """

    __slots__ = ("_match", "_seen", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        re2.compile(source)  # raises re2.error for a bad pattern, as before
        self._match = re2.compile(source, options=_NEVER_CAPTURE)._regexp.Match
        self._seen: dict[str, bool] = {}
        """The answers for short texts: a schema's apiVersion, kind, namespace and path fields
        take the same few values in most objects of a file."""

    def search(self, text: str) -> bool:
        found = self._seen.get(text)
        if found is not None:
            return found
        try:
            encoded = text.encode()
        except UnicodeEncodeError:
            encoded = text.encode("utf-8", "surrogatepass")
        start: int = self._match(_UNANCHORED, encoded, 0, len(encoded))[0][0]
        found = start >= 0
        if len(text) <= _MEMO_TEXT:
            memo.remember(self._seen, text, found)
        return found


def _never_capture() -> re2.Options:
    options = re2.Options()
    options.never_capture = True
    return options


_NEVER_CAPTURE: Final = _never_capture()
_MEMO_TEXT: Final = 256
_UNANCHORED: Final = re2._re2.RE2.Anchor.UNANCHORED
