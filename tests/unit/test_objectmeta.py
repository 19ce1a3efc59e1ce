"""Labels, annotations and finalizers as the API server checks them (apimachinery v0.35); the
whole answers are held to the real server by `test_checker_fidelity` (the `metadata:` cases)."""

from __future__ import annotations

import pytest

from fivespot.policies.admission_eval import objectmeta
from fivespot.policies.kubeversions import DEFAULT

KEY_RULE = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
            "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
            "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


@pytest.mark.parametrize(("key", "problems"), [
    ("app", []), ("example.com/app", []), ("a.b_c-d", []),
    ("bad key!", [KEY_RULE]),
    ("/x", ["prefix part must be non-empty"]),
    ("x/", ["name part must be non-empty", KEY_RULE]),
    ("k" * 64, ["name part must be no more than 63 bytes"]),
    ("a/b/c", ["a valid label key must consist of alphanumeric characters, '-', '_' or '.', and "
               "must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  "
               "or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?"
               "[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. "
               "'example.com/MyName')"]),
])
def test_a_qualified_name_is_checked_as_content_is_label_key_checks_it(
        key: str, problems: list[str]) -> None:
    assert objectmeta.qualified_name(key, server=DEFAULT) == problems


def test_each_bad_label_key_and_value_is_one_invalid_value_of_metadata_labels() -> None:
    found = objectmeta.errors({"labels": {"bad key!": "ok", "team": "z" * 64}}, create=True, server=DEFAULT)
    assert [(e.path, e.message[:33]) for e in found] == [
        ("metadata.labels", 'Invalid value: "bad key!": name p'),
        ("metadata.labels", 'Invalid value: "zzzzzzzzzzzzzzzzz'),
    ]
    assert found[1].message.endswith(": must be no more than 63 bytes")


def test_annotation_keys_are_checked_lowercased_and_all_of_them_together_are_bounded() -> None:
    assert objectmeta.errors({"annotations": {"Example.COM/Upper": "y"}}, create=True, server=DEFAULT) == []
    at_limit = {"big": "x" * (objectmeta.ANNOTATIONS_MAX_BYTES - 3)}
    assert objectmeta.errors({"annotations": at_limit}, create=True, server=DEFAULT) == []
    over = objectmeta.errors({"annotations": {"big": "é" * (objectmeta.ANNOTATIONS_MAX_BYTES // 2)}},
                             create=True, server=DEFAULT)  # bytes, not characters
    assert [e.message for e in over] == ["Too long: may not be more than 262144 bytes"]


def test_finalizers_are_checked_on_a_create_only_and_warned_about_unless_domain_qualified() -> None:
    meta = {"finalizers": ["cleanup", "a.b", "example.com/x", "orphan"]}
    assert objectmeta.errors(meta, create=False, server=DEFAULT) == []
    assert objectmeta.errors(meta, create=True, server=DEFAULT) == []
    assert objectmeta.warnings(meta, None, server=DEFAULT) == [
        'metadata.finalizers: "a.b": prefer a domain-qualified finalizer name including a path (/) '
        "to avoid accidental conflicts with other finalizer writers",
        'metadata.finalizers: "cleanup": prefer a domain-qualified finalizer name to avoid '
        "accidental conflicts with other finalizer writers",
    ]
    assert objectmeta.warnings(meta, {"finalizers": ["cleanup", "a.b"]}, server=DEFAULT) == []  # none added
