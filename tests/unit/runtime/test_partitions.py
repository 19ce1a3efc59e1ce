"""Every namespace belongs to one partition: the one listing it, else `default`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fivespot.api.bundle import Bundle, parse_bundle
from fivespot.runtime.partitions import Partitions

GOLDEN_BUNDLE = Path(__file__).resolve().parents[1] / "golden" / "agent-sandbox" / "bundle.json"


def bundle_with(partitions: list[dict[str, Any]]) -> Bundle:
    data = json.loads(GOLDEN_BUNDLE.read_text())
    data["partitions"] = partitions
    return parse_bundle(data)


BUNDLE = bundle_with([{"name": "agents", "namespaces": ["agents", "agents-2"]},
                      {"name": "default", "namespaces": []}])


def test_a_listed_namespace_belongs_to_its_partition_and_any_other_to_default() -> None:
    partitions = Partitions.from_bundle(BUNDLE)
    assert partitions.names == ("agents", "default")
    assert partitions.of("agents") == "agents"
    assert partitions.of("agents-2") == "agents"
    assert partitions.of("team-x") == "default"


def test_without_a_default_partition_an_unlisted_namespace_has_no_owner() -> None:
    partitions = Partitions.from_pairs([("agents", ["agents"])])
    assert partitions.of("team-x") is None
    assert partitions.of("agents") == "agents"


def test_a_bundle_without_partitions_has_a_default_that_takes_everything() -> None:
    partitions = Partitions.from_bundle(bundle_with([]))
    assert partitions.names == ("default",)
    assert partitions.of("anything") == "default"


def test_narrowing_the_campaign_keeps_the_namespace_mapping_global() -> None:
    narrowed = Partitions.from_bundle(BUNDLE).only(["agents"])
    assert narrowed.campaign == ("agents",)
    assert narrowed.of("team-x") == "default"


def test_an_unknown_partition_or_a_namespace_in_two_partitions_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown partitions"):
        Partitions.from_bundle(BUNDLE).only(["nope"])
    with pytest.raises(ValueError, match="is in partitions"):
        Partitions.from_pairs([("a", ["x"]), ("b", ["x"])])
