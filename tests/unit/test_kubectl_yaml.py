"""`fivespot check` reads a manifest as kubectl sends it: plain scalars typed by go-yaml v2 (not
YAML 1.1 as PyYAML types them), keys made strings, integral floats sent as integers, and what JSON
cannot hold refused. Held to the real kubectl: `kubectl annotate --local -o json` runs kubectl's
own YAML-to-JSON step and prints what it would send, without a cluster."""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fivespot.compiler.diagnostics import InputError
from fivespot.compiler.kubectlyaml import MERGE, plain_scalar
from fivespot.compiler.check.objectyaml import parse_documents, read_text

_INT64 = 1 << 63

CURATED = [
    "1e1", "1E1", "1.0", "1.", ".5", "-.5", "+.5", ".5e3", ".5_5", "1.0e5", "1e-400", "1e400",
    "08", "09", "0777", "0o7", "0O17", "0x1F", "0X1f", "0b11", "0B11", "-0b11", "+0x10", "-0x10",
    "0x", "0b", "0o", "0", "00", "-0", "+0", "-0.0", "+5", "-5", "1_000", "1__0", "_1", "1_",
    "1:00", "190:20:30", "1:20.5", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-1-2",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
    "18446744073709551615", "18446744073709551616", "99999999999999999999999",
    "0xFFFFFFFFFFFFFFFF", "0x1FFFFFFFFFFFFFFFF", "123456789.0", "1e20", "1e21", "1e22",
    "y", "Y", "n", "N", "yes", "Yes", "YES", "no", "No", "on", "On", "ON", "off", "Off", "OFF",
    "true", "True", "TRUE", "false", "False", "FALSE", "yEs", "oN", "t", "f", "o", "O",
    "~", "null", "Null", "NULL", "nULL", ".", "-", "--", "+", "+.", "-.", "..5", ".5.", "1.2.3",
    "15m", "1h30m", "5spot.finos.org/v1", "1.5GiB", "10.0.0.1", "1e3g", "0x1g", "1_000s",
    ".inf_", "-.infinity", "Infinity", "NaN", "nan", "inf", "+inf", "1e+5", "1e-5", "1.5e+3",
]


def _random_tokens(count: int) -> list[str]:
    generator = random.Random(1403)
    alphabet = "0123456789" * 3 + "+-._eExXoObBaAfF:yYnN~"
    tokens: list[str] = []
    while len(tokens) < count:
        token = "".join(generator.choice(alphabet) for _ in range(generator.randint(1, 8)))
        if token.endswith(":") or token in ("-", "~:") or token.startswith("-") and token[1:2] == " ":
            continue
        tokens.append(token)
    return tokens


def _kubectl() -> str:
    found = shutil.which("kubectl")
    assert found, "kubectl is needed (README: The two commands); it is what this test compares with"
    return found


def _sent_by_kubectl(path: Path) -> list[dict[str, Any]]:
    done = subprocess.run([_kubectl(), "annotate", "--local", "-f", str(path), "fivespot=probe",
                           "-o", "json"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    decoder, text, position = json.JSONDecoder(), done.stdout, 0
    found: list[dict[str, Any]] = []
    while position < len(text):
        while position < len(text) and text[position].isspace():
            position += 1
        if position < len(text):
            value, position = decoder.raw_decode(text, position)
            found += value["items"] if value.get("kind") == "List" else [value]
    for obj in found:
        del obj["metadata"]["annotations"]
    return found


def _as_server_decodes(value: Any) -> Any:
    """An integer past int64 as the float64 the API server's decoder makes of it (the checker
    gives such integers that meaning; kubectl's own output has already rounded them)."""
    if isinstance(value, dict):
        return {k: _as_server_decodes(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_server_decodes(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and not -_INT64 <= value < _INT64:
        return float(value)
    return value


def _sendable(token: str) -> bool:
    value = plain_scalar(token)
    return value is not MERGE and not (isinstance(value, float) and not math.isfinite(value))


def _keyable(token: str) -> bool:
    """kubectl makes a string of a bool, float or int64 key, and refuses null and larger ints."""
    value = plain_scalar(token)
    if value is None or value is MERGE:
        return False
    return not isinstance(value, int) or isinstance(value, bool) or -_INT64 <= value < _INT64


def test_every_plain_scalar_is_read_as_kubectl_sends_it_as_a_value_and_as_a_key(
        tmp_path: Path) -> None:
    tokens = CURATED + _random_tokens(1500)
    values = [t for t in tokens if _sendable(t)]
    keys = [t for t in tokens if _keyable(t)]
    documents = []
    for start in range(0, max(len(values), len(keys)), 60):
        body = "".join(f"  - {token}\n" for token in values[start:start + 60])
        # one key to a mapping: `1` and `0x1` are one key once written, in no stated order
        body += "  k:\n" + "".join(f"  - {token}: {index}\n"
                                   for index, token in enumerate(keys[start:start + 60]))
        documents.append("apiVersion: 5spot.finos.org/v1alpha1\nkind: ScheduledCapacity\n"
                         f"metadata: {{name: probe-{start}, namespace: agents}}\nspec:\n  v:\n"
                         + body)
    text = "---\n".join(documents)
    path = tmp_path / "probe.yaml"
    path.write_text(text)
    theirs = [_as_server_decodes(obj) for obj in _sent_by_kubectl(path)]
    for reader in (read_text, parse_documents):  # the fast path where it applies; the reference
        mine = [_as_server_decodes(d.data) for d in reader(text, "probe.yaml")]
        assert len(mine) == len(theirs) == len(documents)
        for own, kubectl in zip(mine, theirs):
            for got, want, token in zip(own["spec"]["v"], kubectl["spec"]["v"],
                                        values[int(own["metadata"]["name"][6:]):]):
                assert (type(got), got) == (type(want), want), (reader.__name__, token)
            assert own == kubectl, reader.__name__


@pytest.mark.parametrize(("text", "message"), [
    ("v: .nan\n", "json: unsupported value: NaN"),
    ("v: [1, -.inf]\n", "json: unsupported value: -Inf"),
    ("~: x\n", "unsupported map key of type: %!s(<nil>), key: <nil>"),
    ("12345678901234567890: x\n", "unsupported map key of type: uint64, key: 0xab54a98ceb1f0ad2"),
])
def test_what_kubectl_cannot_send_is_refused_as_it_refuses_it(
        tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata:\n"
                    + "".join(f"  {line}\n" for line in text.splitlines()))
    done = subprocess.run([_kubectl(), "annotate", "--local", "-f", str(path), "x=y", "-o", "json"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0 and message.split(", key")[0] in done.stderr, done.stderr
    for reader in (read_text, parse_documents):
        with pytest.raises(InputError) as raised:
            reader(path.read_text(), "bad.yaml")
        assert f"error converting YAML to JSON: {message}" in str(raised.value.diagnostics[0])


@pytest.mark.parametrize(("token", "value"), [
    ("1e1", 10.0), ("08", 8.0), ("0o7", 7), ("0B11", 3), ("1:00", "1:00"), ("y", True),
    ("N", False), ("2001-12-14", "2001-12-14"), ("0x", "0x"), ("1_000", 1000), ("_1", "_1"),
    ("18446744073709551615", 2**64 - 1), ("-9223372036854775809", -9223372036854775809.0),
    ("0x1FFFFFFFFFFFFFFFF", "0x1FFFFFFFFFFFFFFFF"), ("1" + "0" * 400, "1" + "0" * 400),
    (".5_5", 0.55), ("1e400", "1e400"), ("", None), ("~", None), ("yEs", "yEs"),
])
def test_plain_scalars_resolve_as_go_yaml_v2_resolves_them(token: str, value: Any) -> None:
    got = plain_scalar(token)
    assert (type(got), got) == (type(value), value)


def test_a_json_stream_is_read_as_kubectl_reads_it(tmp_path: Path) -> None:
    text = ('{\n\t"apiVersion": "v1", "kind": "ConfigMap",\n\t"metadata": {"name": "a"},\n'
            '\t"data": {"n": 1.0, "big": 1e20, "x": 1.5, "k": "v", "k": "w"}\n}\n'
            '  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}\n')
    path = tmp_path / "stream.json"
    path.write_text(text)
    theirs = [_as_server_decodes(obj) for obj in _sent_by_kubectl(path)]
    mine = read_text(text, "stream.json")
    assert [_as_server_decodes(d.data) for d in mine] == theirs
    assert [(d.line, d.column) for d in mine] == [(1, 1), (6, 3)]


@pytest.mark.parametrize(("text", "where", "message"), [
    ("{apiVersion: v1, kind: ConfigMap}\n", "1:2", "invalid JSON: Expecting property name"),
    ('{"apiVersion": "v1", "x": NaN}', "1:1", "invalid JSON: invalid character 'N'"),
    ('{"apiVersion": "v1",\n "kind": }', "2:10", "invalid JSON: Expecting value"),
])
def test_what_kubectl_cannot_read_as_json_is_refused_with_its_position(
        tmp_path: Path, text: str, where: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    done = subprocess.run([_kubectl(), "annotate", "--local", "-f", str(path), "x=y", "-o", "json"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0, done.stdout  # kubectl refuses each too
    with pytest.raises(InputError) as raised:
        read_text(text, "bad.json")
    assert str(raised.value.diagnostics[0]).startswith(f"bad.json:{where}: {message}")


MERGES = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: merges}
a: &a {x: "a-x", y: "a-y", n: {deep: "a"}}
b: &b {x: "b-x", z: "b-z"}
c: &c {<<: *a, y: "c-y"}
data:
  before: {x: "explicit", <<: *a}
  after: {<<: *a, x: "explicit"}
  around: {x: "first", <<: *b, z: "last"}
  list: {<<: [*a, *b]}
  reversed: {<<: [*b, *a]}
  nested: {<<: *c}
  twice: {<<: *a, <<: *b}
"""


def test_merge_keys_set_their_keys_where_they_stand_as_kubectl_merges_them(tmp_path: Path) -> None:
    path = tmp_path / "merges.yaml"
    path.write_text(MERGES)
    theirs = _sent_by_kubectl(path)
    for reader in (read_text, parse_documents):
        mine = [d.data for d in reader(MERGES, "merges.yaml")]
        assert mine == theirs, reader.__name__
