"""Reading object files for `fivespot check`: the fast path (rapidyaml's JSON) gives exactly what
the reference path (libyaml's parser, typed as kubectl types: `test_kubectl_yaml`) gives — every value, its type, each document's line
and column, the fields given twice — or leaves the document to the reference path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fivespot.compiler.check import objectyaml
from fivespot.compiler.diagnostics import InputError
from fivespot.compiler.kubectlyaml import plain_scalar
from fivespot.compiler.check.objectyaml import parse_documents, read_text

pytestmark = pytest.mark.unit


def _shape(documents: list[Any]) -> list[tuple[Any, ...]]:
    return [(repr(d.data), d.line, d.column, d.duplicates) for d in documents]


def _same(text: str) -> None:
    if objectyaml.is_json(text):  # kubectl (and read_text) would read it as JSON: keep it YAML
        text = "# yaml\n" + text
    try:
        reference = parse_documents(text, "f.yaml")
    except InputError as error:
        with pytest.raises(InputError) as raised:
            read_text(text, "f.yaml")
        assert raised.value.diagnostics == error.diagnostics
        return
    fast = read_text(text, "f.yaml")
    assert _shape(fast) == _shape(reference), text
    for mine, theirs in zip(fast, reference):
        for path in (("metadata", "name"), ("spec",), ("kind",), ("nope", "x")):
            assert mine.locate(*path) == theirs.locate(*path), (text, path)


TRICKY = [
    "a: yes\nb: no\nc: on\nd: Off\ne: ~\nf:\ng: True\nh: NULL\n",
    "a: 0777\nb: 0x1F\nc: .5\nd: 1e3\ne: +1\nf: 1_000\ng: 1:20\nh: .inf\ni: -.NaN\nj: 1.\n",
    "a: 2026-01-01\nb: 2001-12-14t21:59:43.10-05:00\nc: 15m\nd: 1h30m\ne: -node\nf: 1d\n",
    "8: x\n1.5: y\nnull: z\ntrue: w\n",
    "a: &x {b: 1}\nc: *x\nd: !!str 5\ne: !custom 1\n<<: {f: 2}\n",
    "a: |\n  line\n  two\nb: >-\n  folded\n  text\nc: |+\n  keep\n\n",
    'a: "tab\\there"\nb: "\\u00e9\\x41\\N"\nc: \'it\'\'s\'\nd: "multi\n  line"\ne: plain\n  continued\n',
    "a: 1\na: 2\nb: {c: 1, c: 2}\nd: [{e: 1, e: 2}]\n",
    "# only a comment\n---\n# another\n---\na: 1\n--- # comment\nb: 2\n---\n...\n---\nc: 3\n",
    "--- {a: 1}\n--- [1, 2]\n--- plain\n---\n",
    "%YAML 1.1\n---\na: 1\n",
    "a: 1\r\nb: 2\r\n",
    "a:\tb\n",
    "\ufeffa: 1\n",
    "a: 'É😀'\nb: nœud\nc: \"\\u2028\"\n",
    "a: [1, 2, [3, {b: 4}]]\nc: {d: [], e: {}}\n",
    "a: '8'\nb: \"true\"\nc: '0777'\n",
    "a: " + "[" * 150 + "]" * 150 + "\n",
    "a: 1" + "0" * 5000 + "\n",
    "a: [unclosed\n",
    "a: b: c\n",
    "  indented: 1\n  second: 2\n",
    "- 1\n- two\n- {three: 3}\n",
    "? complex\n: key\n",
    ": empty key\n",
    "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n",
    "key: value # comment\nother: 'quoted # not a comment'\n",
    "a: -1\nb: -0\nc: 0.0\nd: 12345678901234567890\ne: -1.25\n",
    "a: 1.5e+3\nb: 1.5e3\nc: 6.8523015e+5\nd: 685.230_15e+03\n",
    "...\na: 1\n",
    "--- \xa0\n--- []\n",  # a no-break space is a scalar to YAML, not blank as to str.strip
    "--- \u2003x\n",
    "",
    "\n\n",
]


@pytest.mark.parametrize("text", TRICKY)
def test_the_fast_path_reads_each_tricky_input_as_the_reference_does(text: str) -> None:
    _same(text)


_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-10**20, 10**20),
    st.floats(allow_nan=False, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["yes", "No", "on", "~", "0777", "1e3", ".5", "15m", "2026-01-01", "-", "---",
                     "...", "a: b", "#x", "&a", "*a", "!t", "|", ">", "?", "%", "@x", "`x", "1:20"]),
)
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.text(max_size=8), st.integers(0, 9), st.booleans()), inner,
                    max_size=4)), max_leaves=12)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_VALUES, min_size=1, max_size=3), st.booleans(), st.sampled_from([None, 2, 4]))
def test_the_fast_path_agrees_with_the_reference_on_generated_documents(
        values: list[Any], flow: bool, indent: int | None) -> None:
    text = yaml.safe_dump_all(values, default_flow_style=flow, indent=indent, allow_unicode=True,
                              explicit_start=len(values) > 1)
    _same(text)


DUPLICATES = [
    "a: 1\nb: 2\na: 3\n",
    "spec:\n  x: 1\n  y: {z: 1, z: 2}\n",
    "items:\n- {name: a, name: b}\n- plain\n",
    "a: 'x\": y'\na: 'x\": y'\n",
    "'k\": ': 1\nk: 2\n'k\": ': 3\n",
    "a: {'\"': 1, '\"\"': 2, '\"': 3}\n",
    "a: [{b: 1}, {b: 1, c: 'd\": e', b: 2}]\n",
    "a: 1\na: 2\nb: ':x'\n",
    "a: '::'\nb: {c: ':', c: ''}\n",
]
"""Keys given twice, where strings hold `": ` too: the decoded value keeps one of them, so the
fast path counts the colons rapidyaml wrote against those of the value written again, and leaves
these to the reference."""

QUOTES_ONCE = [
    "a: 'x\": y'\nb: foo\"bar\nc: {'\": ': '\": '}\n",
    "'k\": ': 1\nk: 2\n'\"': 3\n",
    "a: [\"q\": 1]\n",
]


@pytest.mark.parametrize("text", DUPLICATES)
def test_a_key_given_twice_is_found_whatever_the_strings_around_it_hold(text: str) -> None:
    _same(text)
    assert parse_documents(text, "f.yaml")[0].duplicates
    assert objectyaml._fast_value(text, objectyaml._Rapid()) == (False, None)


@pytest.mark.parametrize("text", QUOTES_ONCE)
def test_quotes_and_colons_in_strings_keep_a_document_on_the_fast_path(text: str) -> None:
    _same(text)
    read, value = objectyaml._fast_value(text, objectyaml._Rapid())
    assert read and value == parse_documents(text, "f.yaml")[0].data


_QUOTED_KEYS = st.text(alphabet="ab\": ,{}[]#-", min_size=0, max_size=6)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(_QUOTED_KEYS, _QUOTED_KEYS), min_size=1, max_size=5), st.booleans(),
       st.booleans())
def test_the_fast_path_agrees_on_quoted_keys_and_values_given_once_or_twice(
        pairs: list[tuple[str, str]], twice: bool, flow: bool) -> None:
    if twice:
        pairs = [*pairs, pairs[0]]

    def quoted(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    entries = [f"{quoted(key)}: {quoted(value)}" for key, value in pairs]
    text = f"m: {{{', '.join(entries)}}}\n" if flow else "m:\n" + "".join(f"  {e}\n" for e in entries)
    _same(text)


def test_one_tree_and_buffer_read_documents_of_any_size_one_after_another() -> None:
    small = "a: 1\nb: [x, y]\n"
    large = "items:\n" + "".join(f"- {{name: item-{i}, value: v{i}}}\n" for i in range(3000))
    text = "---\n".join([small, large, small, "c: {d: e}\n", large])
    _same(text)
    rapid = objectyaml._Rapid()
    assert len(rapid.buffer) < 100_000 < rapid.json(large.encode())  # the buffer grew
    assert objectyaml._fast_value(small, rapid) == (True, {"a": 1, "b": ["x", "y"]})


def test_an_object_file_is_read_mostly_by_the_fast_path() -> None:
    base = ("apiVersion: 5spot.finos.org/v1alpha1\nkind: ScheduledCapacity\n"
            "metadata: {name: pool-%d, namespace: agents}\nspec:\n"
            "  capacity: {path: spec.warmReplicas, activeValue: %d}\n"
            "  handback: {drainedPath: status.inUse, timeout: 15m}\n  enabled: true\n")
    text = "---\n".join(base % (i, i % 11) for i in range(50))
    documents = read_text(text, "f.yaml")
    assert [d.line for d in documents] == [1 + 8 * i for i in range(50)]
    assert all(d._positions is not None and type(d._positions).__name__ == "_ReferencePositions"
               for d in documents)
    assert documents[3].locate("metadata", "name").line == 27


# --- the shortcut for number-like strings, held to kubectl's resolver ---------------------------


@settings(max_examples=2000, deadline=None)
@given(st.from_regex(objectyaml._WORDLIKE, fullmatch=True).filter(lambda t: "\n" not in t))
def test_a_digit_led_scalar_with_a_letter_no_go_yaml_number_has_is_a_string_to_kubectl(
        text: str) -> None:
    assert isinstance(plain_scalar(text), str), text


@pytest.mark.parametrize("text", ["15m", "1h30m", "5spot.finos.org/v1alpha1", "0x1g", "1e3g",
                                  "1_000s", "2001-12-14-node", "10.0.0.1-gw", "1.5GiB"])
def test_the_shortcut_takes_these_number_like_strings(text: str) -> None:
    assert objectyaml._WORDLIKE.fullmatch(text) and plain_scalar(text) == text


@pytest.mark.parametrize("text", ["2001-12-14t21:59:43.10-05:00", "2001-12-14T21:59:43Z",
                                  "0x1F", "0b101", "1e3", "1.5e+3", "190:20:30", "0o17", "0X1A"])
def test_the_shortcut_leaves_yaml_numbers_and_timestamps_to_the_resolver(text: str) -> None:
    assert objectyaml._WORDLIKE.fullmatch(text) is None


def test_reading_a_plain_object_file_does_not_import_pyyaml(tmp_path: Any) -> None:
    path = tmp_path / "objects.yaml"
    path.write_text("apiVersion: 5spot.finos.org/v1alpha1\nkind: ScheduledCapacity\n"
                    "metadata: {name: a, namespace: agents}\nspec:\n  timeout: 15m\n  count: 4\n"
                    "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n")
    code = ("import sys; from pathlib import Path; from fivespot.compiler.check.objectyaml import read_documents; "
            f"docs = read_documents(Path({str(path)!r})); "
            "assert [d.data['kind'] for d in docs] == ['ScheduledCapacity', 'ConfigMap']; "
            "print(sorted(m for m in sys.modules if m == 'yaml' or m.startswith('yaml.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
