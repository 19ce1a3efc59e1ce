"""`check -o json` and `test -o json` are written by msgspec's C encoder: the bytes must be the
standard library's `json.dumps(indent=2, ensure_ascii=False)`, which they were before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fivespot.compiler.check.render import pretty_json

# every JSON value a result can hold (no float: no result has one), any Unicode text
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.text(st.characters(codec="utf-8"), max_size=12),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(st.characters(codec="utf-8"), max_size=8), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=600, deadline=None)
@given(_JSON)
def test_pretty_json_writes_what_json_dumps_writes_for_any_value_without_floats(value: Any) -> None:
    assert pretty_json(value) == json.dumps(value, indent=2, ensure_ascii=False)


@pytest.mark.parametrize("text", ["\x00\x1f\x7f\"\\/", "\u2028\u2029", "é\U0001f600", ""])
def test_pretty_json_escapes_control_and_separator_characters_as_json_dumps_does(text: str) -> None:
    value = {"results": [{text: [text, {}, []]}]}
    assert pretty_json(value) == json.dumps(value, indent=2, ensure_ascii=False)


def test_a_file_name_that_is_not_utf_8_is_still_written_as_json_dumps_writes_it() -> None:
    name = bytes([0xFF]).decode("utf-8", "surrogateescape") + ".yaml"  # as os.listdir gives it
    value = {"source": {"file": str(Path(name)), "line": 1}}
    assert pretty_json(value) == json.dumps(value, indent=2, ensure_ascii=False)
