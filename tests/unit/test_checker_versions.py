"""The offline checker decides and words as the API server version it is given: the differences
fivespot/policies/kubeversions.py lists, each as the real servers show it (the fidelity corpus holds the
checker to every supported version's server)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from fivespot.policies.admission_eval import Checker, Request
from fivespot.policies.kubeversions import BY_MINOR, KubernetesVersion

GAUGES = Path(__file__).resolve().parents[1] / "integration" / "testdata" / "kubeversions" / "gauges.yaml"
BASE: dict[str, Any] = {"apiVersion": "fidelity.fivespot.example/v1", "kind": "Gauge",
                        "metadata": {"name": "gauge", "namespace": "a"},
                        "spec": {"replicas": 3, "label": "ok"}}


def checker(minor: str) -> Checker:
    return Checker.compile([yaml.safe_load(GAUGES.read_text())], server=BY_MINOR[minor])


def gauge(field: str, value: Any, base: dict[str, Any] = BASE) -> dict[str, Any]:
    obj = copy.deepcopy(base)
    obj["spec"][field] = value
    return obj


def message(minor: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> str | None:
    verdict = checker(minor).check(Request("UPDATE" if old else "CREATE", obj, old))
    return verdict.status.message if verdict.status else None


@pytest.mark.parametrize("field, value, detail", [
    ("replicas", 2**31, "Checked value must be of type integer with format int32 in spec.replicas"),
    ("replicas", -(2**31) - 1, "Checked value must be of type integer with format int32 in spec.replicas"),
    ("replicas", 1e10, "Checked value must be of type integer with format int32 in spec.replicas"),
    ("ratio", 3.5e38, "Checked value must be of type number with format float in spec.ratio"),
    ("counts", [1, 2**31], "Checked value must be of type integer with format int32 in spec.counts[1]"),
])
def test_a_number_outside_its_formats_range_is_refused_from_1_36_on(
        field: str, value: Any, detail: str) -> None:
    expected = f'Gauge.fidelity.fivespot.example "gauge" is invalid: <nil>: Invalid value: "": {detail}'
    for minor in ("1.36", "1.37"):
        assert message(minor, gauge(field, value)) == expected
    for minor in ("1.34", "1.35"):
        assert message(minor, gauge(field, value)) is None


@pytest.mark.parametrize("field, value", [
    ("replicas", 2**31 - 1), ("replicas", -(2**31)), ("ratio", 3.4e38), ("ratio", 2**40),
    ("total", 2**63 - 1), ("plain", 2**31), ("exact", 1e308),
])
def test_a_number_its_format_holds_is_accepted_by_every_version(field: str, value: Any) -> None:
    for minor in BY_MINOR:
        assert message(minor, gauge(field, value)) is None, minor


def test_an_unchanged_out_of_range_value_is_ratcheted_on_update() -> None:
    old = gauge("replicas", 2**31)
    assert message("1.37", gauge("label", "changed", old), old) is None
    assert message("1.37", gauge("replicas", 2**31 + 1, old), old) is not None


def test_a_failed_rule_shows_the_schema_type_on_1_34_and_the_value_after() -> None:
    obj = gauge("label", "forbidden")
    assert message("1.34", obj) == ('Gauge.fidelity.fivespot.example "gauge" is invalid: '
                                    'spec.label: Invalid value: "string": must not be forbidden')
    assert message("1.35", obj) == ('Gauge.fidelity.fivespot.example "gauge" is invalid: '
                                    'spec.label: Invalid value: "forbidden": must not be forbidden')


@pytest.mark.parametrize("minor, wording", [
    ("1.34", "name part must be no more than 63 characters"),
    ("1.35", "name part must be no more than 63 bytes"),
    ("1.37", "name part must be no more than 63 bytes"),
])
def test_metadata_messages_are_worded_as_each_version_words_them(minor: str, wording: str) -> None:
    obj = copy.deepcopy(BASE)
    obj["metadata"]["labels"] = {"k" * 64: "v"}
    assert wording in str(message(minor, obj))


def test_every_supported_version_is_a_distinct_row() -> None:
    rows: list[KubernetesVersion] = list(BY_MINOR.values())
    assert len({(v.crd_rule_error_value, v.numeric_format_ranges, v.metadata_name_cost_cap,
                 v.label_key_noun) for v in rows}) == len(rows)
