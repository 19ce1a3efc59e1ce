"""The cluster API layer: one registry of built-in providers, one bundle model both ways."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fivespot.api.bundle import BUNDLE_VERSION, BundleError, load_bundle, parse_bundle
from fivespot.api.providers import BUILTIN_PROVIDERS, BY_COMMAND, BuiltinProvider
from fivespot.controllers.spotschedules.controller import EVALUATORS, PROVIDER_TYPES

GOLDEN_BUNDLE = Path(__file__).parent / "golden" / "agent-sandbox" / "bundle.json"


def test_every_builtin_provider_has_one_registry_entry_and_a_decision() -> None:
    assert list(BUILTIN_PROVIDERS) == list(BuiltinProvider)
    assert set(EVALUATORS) == set(BuiltinProvider)
    assert sorted(PROVIDER_TYPES) == sorted(BY_COMMAND) == ["capital-markets", "composite", "manual", "time-based"]
    for builtin, provider in BUILTIN_PROVIDERS.items():
        assert provider.kind == builtin.value
        assert provider.identity == f"fivespot-provider-{provider.command}"
        assert provider.crd_name == f"{provider.plural}.spotschedules.5spot.finos.org"


def test_the_compiled_bundle_parses_and_writes_back_byte_for_byte() -> None:
    text = GOLDEN_BUNDLE.read_text()
    bundle = parse_bundle(json.loads(text))
    assert bundle.to_json() == text
    assert bundle.bundle_version == BUNDLE_VERSION
    assert load_bundle(GOLDEN_BUNDLE) == bundle


@pytest.mark.parametrize("change,words", [
    (lambda d: d.update(bundleVersion=2), "bundle.bundleVersion: 2 is not supported"),
    (lambda d: d.update(bundleVersion=True), "bundle.bundleVersion: True is not supported"),
    (lambda d: d.pop("namespace"), "bundle.namespace: Field required"),
    (lambda d: d["consumers"][0].update(maxActiveValue="16"), "bundle.consumers[0].maxActiveValue"),
    (lambda d: d["consumers"][0].update(capacityPaths=[]), "bundle.consumers[0].capacityPaths"),
    (lambda d: d["webhook"].update(hostGovernance="Allow"), "bundle.webhook.hostGovernance"),
    (lambda d: d["partitions"][0].update(extra=1), "bundle.partitions[0].extra"),
], ids=["newer-version", "bool-version", "no-namespace", "mistyped-ceiling", "no-paths",
        "unknown-action", "unknown-field"])
def test_a_bundle_this_build_does_not_understand_is_refused_naming_the_field(
        change: object, words: str, tmp_path: Path) -> None:
    data = json.loads(GOLDEN_BUNDLE.read_text())
    change(data)  # type: ignore[operator]
    with pytest.raises(BundleError, match=words.replace("[", r"\[").replace("]", r"\]")):
        parse_bundle(data)
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BundleError, match=f"^{path}: "):
        load_bundle(path)


def test_an_unreadable_bundle_is_refused_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="cannot read the bundle"):
        load_bundle(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(BundleError, match="not JSON"):
        load_bundle(tmp_path / "bad.json")
