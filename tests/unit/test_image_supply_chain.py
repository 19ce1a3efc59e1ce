"""The image's SBOM and provenance, made from a fixed set of inputs: every input appears with its
digest, the documents validate against their published schemas, and the same inputs give the same
bytes. The documents of a real build are checked against the built image in
tests/integration/test_image.py."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from typing import Any

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from google.protobuf import json_format
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement
from packageurl import PackageURL

from tests.image_scripts import build_script, supply_chain

build = build_script()
chain = supply_chain()

DIGEST = "sha256:" + "1" * 64
DEBS = [
    build.DebianPackage("libc6", "2.36-9+deb12u14", "amd64",
                        "pool/main/g/glibc/libc6_2.36-9+deb12u14_amd64.deb", "a" * 64, "glibc"),
    build.DebianPackage("zlib1g", "1:1.2.13.dfsg-1", "amd64",
                        "pool/main/z/zlib/zlib1g_1.2.13.dfsg-1_amd64.deb", "b" * 64, "zlib"),
    build.DebianPackage("netbase", "6.4", "all", "pool/main/n/netbase/netbase_6.4_all.deb",
                        "c" * 64, "netbase"),
]
WHEELS = [build.PinnedWheel("Flask", "3.1.3", "d" * 64),
          build.PinnedWheel("typing_extensions", "4.16.0", "e" * 64)]
BACKEND = [build.PinnedWheel("setuptools", "84.2.1", "f" * 64)]
FIVESPOT_WHEEL = build.BuiltWheel("fivespot-0.1.0-py3-none-any.whl", "9" * 64)


def inputs(**changes: Any) -> Any:
    image = chain.Image(repository="ghcr.io/finos/fivespot", tag="0.1.0", manifest_digest=DIGEST,
                        archive_name="fivespot-0.1.0.docker.tar", archive_sha256="2" * 64,
                        created=1_780_000_000, platform="linux/amd64")
    source = chain.Source(repository="https://github.com/finos/fivespot", revision="0" * 40,
                          version="0.1.0", license="Apache-2.0")
    found = chain.Inputs(image=image, source=source, distro="debian-12", debian=DEBS,
                         wheels=WHEELS, build_backend=BACKEND, fivespot_wheel=FIVESPOT_WHEEL,
                         tools={"umoci": "0.4.7", "skopeo": "1.9.3", "python": "3.11.7",
                                "pip": "26.3"})
    return dataclasses.replace(found, **changes)


def sbom_json(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(chain.sbom(inputs(**changes)))
    return document


def statement(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(chain.provenance(inputs(**changes), "sbom.cdx.json",
                                                           "3" * 64))
    return document


def _sha256(component: dict[str, Any]) -> str:
    (digest,) = [h["content"] for h in component["hashes"] if h["alg"] == "SHA-256"]
    return str(digest)


# --- the SBOM ----------------------------------------------------------------------------------


def test_the_sbom_lists_every_debian_package_and_wheel_with_its_hash_and_fivespot_itself() -> None:
    components = {c["purl"]: c for c in sbom_json()["components"]}
    assert {purl: _sha256(c) for purl, c in components.items()} == {
        "pkg:deb/debian/libc6@2.36-9%2Bdeb12u14?arch=amd64&distro=debian-12&upstream=glibc": "a" * 64,
        "pkg:deb/debian/zlib1g@1:1.2.13.dfsg-1?arch=amd64&distro=debian-12&upstream=zlib": "b" * 64,
        "pkg:deb/debian/netbase@6.4?arch=all&distro=debian-12": "c" * 64,
        "pkg:pypi/flask@3.1.3": "d" * 64,
        "pkg:pypi/typing-extensions@4.16.0": "e" * 64,
        "pkg:pypi/fivespot@0.1.0": "9" * 64,
    }
    fivespot = components["pkg:pypi/fivespot@0.1.0"]
    assert (fivespot["type"], fivespot["version"]) == ("application", "0.1.0")
    assert fivespot["licenses"] == [{"expression": "Apache-2.0"}]
    assert fivespot["externalReferences"][0]["url"] == "https://github.com/finos/fivespot"
    assert "setuptools" not in json.dumps(components), "the build backend is not in the image"


def test_the_sbom_describes_the_image_by_its_manifest_digest() -> None:
    described = sbom_json()["metadata"]["component"]
    assert described["type"] == "container"
    assert (described["name"], described["version"]) == ("ghcr.io/finos/fivespot", "0.1.0")
    assert _sha256(described) == "1" * 64
    purl = PackageURL.from_string(described["purl"])
    assert (purl.type, purl.name, purl.version) == ("oci", "fivespot", DIGEST)
    assert purl.qualifiers == {"repository_url": "ghcr.io/finos/fivespot", "tag": "0.1.0"}


def test_the_sbom_validates_against_the_cyclonedx_schema() -> None:
    text = chain.sbom(inputs()).decode()
    assert json.loads(text)["specVersion"] == "1.6"
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text, all_errors=True) is None


def test_every_component_is_reachable_from_the_image_in_the_dependency_graph() -> None:
    document = sbom_json()
    edges = {d["ref"]: d.get("dependsOn", []) for d in document["dependencies"]}
    reached, todo = set(), [document["metadata"]["component"]["bom-ref"]]
    while todo:
        ref = todo.pop()
        reached.add(ref)
        todo += [r for r in edges.get(ref, []) if r not in reached]
    assert {c["bom-ref"] for c in document["components"]} <= reached


def test_the_sbom_has_no_clock_and_no_random_serial_number() -> None:
    document = sbom_json()
    assert document["metadata"]["timestamp"] == "2026-05-28T20:26:40+00:00"
    root = document["metadata"]["component"]["bom-ref"]
    assert document["serialNumber"] == f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, root)}"


# --- the provenance ------------------------------------------------------------------------------


def test_the_provenance_is_an_in_toto_statement_v1_with_a_slsa_provenance_v1_predicate() -> None:
    text = chain.provenance(inputs(), "sbom.cdx.json", "3" * 64).decode()
    # The framework's own protobuf definitions: an unknown or misspelt field fails to parse.
    parsed = json_format.Parse(text, statement_pb2.Statement())
    Statement.copy_from_pb(parsed).validate()
    assert parsed.predicate_type == "https://slsa.dev/provenance/v1"
    predicate = json_format.ParseDict(json.loads(text)["predicate"], provenance_pb2.Provenance())
    assert predicate.build_definition.build_type == chain.BUILD_TYPE
    assert predicate.run_details.builder.id == chain.BUILDER_ID
    assert dict(predicate.run_details.builder.version) == {
        "pip": "26.3", "python": "3.11.7", "skopeo": "1.9.3", "umoci": "0.4.7"}


def test_the_provenance_names_the_image_digests_as_its_subjects() -> None:
    subjects = {s["name"]: s["digest"] for s in statement()["subject"]}
    assert subjects == {"ghcr.io/finos/fivespot": {"sha256": "1" * 64},
                        "fivespot-0.1.0.docker.tar": {"sha256": "2" * 64}}


def test_every_input_is_a_resolved_dependency_with_its_digest() -> None:
    definition = statement()["predicate"]["buildDefinition"]
    assert definition["externalParameters"] == {
        "source": "git+https://github.com/finos/fivespot", "revision": "0" * 40}
    resolved = {d["uri"]: d["digest"] for d in definition["resolvedDependencies"]}
    assert resolved == {
        f"git+https://github.com/finos/fivespot@{'0' * 40}": {"gitCommit": "0" * 40},
        "pkg:deb/debian/libc6@2.36-9%2Bdeb12u14?arch=amd64&distro=debian-12&upstream=glibc":
            {"sha256": "a" * 64},
        "pkg:deb/debian/zlib1g@1:1.2.13.dfsg-1?arch=amd64&distro=debian-12&upstream=zlib":
            {"sha256": "b" * 64},
        "pkg:deb/debian/netbase@6.4?arch=all&distro=debian-12": {"sha256": "c" * 64},
        "pkg:pypi/flask@3.1.3": {"sha256": "d" * 64},
        "pkg:pypi/typing-extensions@4.16.0": {"sha256": "e" * 64},
        "pkg:pypi/setuptools@84.2.1": {"sha256": "f" * 64},
    }
    names = {d.get("name") for d in definition["resolvedDependencies"]}
    assert {"libc6_2.36-9+deb12u14_amd64.deb", "netbase_6.4_all.deb"} <= names


def test_the_sbom_and_fivespots_wheel_are_byproducts_with_their_digests() -> None:
    byproducts = statement()["predicate"]["runDetails"]["byproducts"]
    assert {b["name"]: b["digest"]["sha256"] for b in byproducts} == {
        "sbom.cdx.json": "3" * 64, "fivespot-0.1.0-py3-none-any.whl": "9" * 64}


def test_a_build_from_a_dirty_tree_claims_no_commit() -> None:
    source = dataclasses.replace(inputs().source, revision="0" * 40 + "-dirty")
    (described,) = [d for d in statement(source=source)["predicate"]["buildDefinition"][
        "resolvedDependencies"] if d["uri"].startswith("git+")]
    assert "digest" not in described and described["uri"] == "git+https://github.com/finos/fivespot"
    assert described["annotations"]["revision"] == "0" * 40 + "-dirty"


# --- determinism ---------------------------------------------------------------------------------


def test_the_same_inputs_give_the_same_bytes() -> None:
    assert chain.sbom(inputs()) == chain.sbom(inputs())
    assert chain.provenance(inputs(), "sbom.cdx.json", "3" * 64) == chain.provenance(
        inputs(), "sbom.cdx.json", "3" * 64)


@pytest.mark.parametrize("change", [
    {"debian": [*DEBS[:2], dataclasses.replace(DEBS[2], sha256="4" * 64)]},
    {"wheels": [WHEELS[0], dataclasses.replace(WHEELS[1], version="4.16.1")]},
    {"fivespot_wheel": dataclasses.replace(FIVESPOT_WHEEL, sha256="5" * 64)},
], ids=["deb-hash", "wheel-version", "fivespot-wheel"])
def test_a_changed_input_changes_both_documents(change: dict[str, Any]) -> None:
    assert chain.sbom(inputs(**change)) != chain.sbom(inputs())
    sbom = chain.sbom(inputs(**change))
    digest = hashlib.sha256(sbom).hexdigest()
    assert chain.provenance(inputs(**change), "sbom.cdx.json", digest) != chain.provenance(
        inputs(), "sbom.cdx.json", hashlib.sha256(chain.sbom(inputs())).hexdigest())
