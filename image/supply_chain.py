"""The image's software bill of materials (CycloneDX) and its build provenance (in-toto, SLSA v1).

Why: whoever runs, scans or admits the image asks what is in it and how, from what, it was made,
and wants both answers bound to the image's digest. `make image` (image/build.py) writes them next
to the image from the inputs the build itself checked: every Debian package with its version and
the SHA256 of the signed apt index, every wheel with the SHA256 pip checked (`--require-hashes`),
the pinned build backend that built fivespot's wheel, fivespot's wheel, and the source revision.

Both documents are deterministic: the same inputs give the same bytes (no clock: the SBOM's time
is the image's SOURCE_DATE_EPOCH; no random serial number: it is derived from the image digest),
so a rebuild that reproduces the image also reproduces them. Neither is signed here: there is no
signing key on a build machine; a release signs them with cosign (docs/operations/image.md). They
are not copied into the image (docs/design/decisions/0026-supply-chain-digest-sbom-provenance.md).

Only `image/build.py build` imports this module: the Containerfile's build stage runs `rootfs`,
which needs neither document nor cyclonedx-python-lib (pyproject.toml's `image` extra).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import version as installed_version
from typing import Any, Final, Protocol

from cyclonedx.model import ExternalReference, ExternalReferenceType, HashAlgorithm, HashType, XsUri
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.model.license import LicenseExpression
from cyclonedx.model.tool import ToolRepository
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL

STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
PROVENANCE_TYPE: Final = "https://slsa.dev/provenance/v1"
BUILD_TYPE: Final = "https://finos.github.io/fivespot/operations/image.html#provenance"
"""What `make image` does with the parameters below; the page says it to a reader."""
BUILDER_ID: Final = "https://finos.github.io/fivespot/operations/image.html#the-builder"
"""Whoever ran `make image`: an unattested machine (no hosted builder vouches for the run)."""
CYCLONEDX_SCHEMA: Final = SchemaVersion.V1_6
"""CycloneDX 1.6: the newest version the common scanners (Trivy, Grype, Dependency-Track) read."""
SBOM_MEDIA_TYPE: Final = "application/vnd.cyclonedx+json"


class DebianInput(Protocol):
    """A Debian package the image's files come from, as apt's signed index describes it."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def architecture(self) -> str: ...
    @property
    def filename(self) -> str: ...
    @property
    def sha256(self) -> str: ...
    @property
    def source(self) -> str: ...


class WheelInput(Protocol):
    """A wheel pinned with its hash (image/requirements.txt, image/build-requirements.txt)."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def sha256(self) -> str: ...


class BuiltWheelInput(Protocol):
    """fivespot's own wheel, as the build made it."""

    @property
    def file_name(self) -> str: ...
    @property
    def sha256(self) -> str: ...


@dataclass(frozen=True)
class Image:
    """The built image: its manifest digest, and the docker archive made from it."""

    repository: str
    tag: str
    manifest_digest: str
    archive_name: str
    archive_sha256: str
    created: int
    """The image's creation time (SOURCE_DATE_EPOCH), in seconds since the epoch."""
    platform: str


@dataclass(frozen=True)
class Source:
    """The source the image was built from."""

    repository: str
    revision: str
    """The git commit, with `-dirty` appended when the work tree had uncommitted changes."""
    version: str
    license: str

    @property
    def commit(self) -> str | None:
        """The commit, or None when the tree was dirty (the build is not that commit's)."""
        return None if self.revision.endswith("-dirty") or self.revision == "unknown" \
            else self.revision


@dataclass(frozen=True)
class Inputs:
    """Everything the two documents say, as the build gathered and checked it."""

    image: Image
    source: Source
    distro: str
    """The purl `distro` qualifier of the Debian packages (`debian-12` for bookworm)."""
    debian: Sequence[DebianInput]
    wheels: Sequence[WheelInput]
    build_backend: Sequence[WheelInput]
    fivespot_wheel: BuiltWheelInput
    tools: Mapping[str, str]
    """The versions of the programs that built the image (umoci, skopeo, Python, pip)."""


# --- package URLs ------------------------------------------------------------------------------


def deb_purl(package: DebianInput, distro: str) -> str:
    qualifiers = {"arch": package.architecture, "distro": distro}
    if package.source != package.name:
        qualifiers["upstream"] = package.source
    return PackageURL(type="deb", namespace="debian", name=package.name, version=package.version,
                      qualifiers=qualifiers).to_string()


def pypi_purl(name: str, version: str) -> str:
    return PackageURL(type="pypi", name=name, version=version).to_string()


def image_purl(image: Image) -> str:
    name = image.repository.rsplit("/", 1)[-1]
    return PackageURL(type="oci", name=name, version=image.manifest_digest,
                      qualifiers={"repository_url": image.repository, "tag": image.tag}).to_string()


def _sha256(hex_digest: str) -> list[HashType]:
    return [HashType(alg=HashAlgorithm.SHA_256, content=hex_digest)]


# --- the SBOM ----------------------------------------------------------------------------------


def sbom(inputs: Inputs) -> bytes:
    """The image's CycloneDX 1.6 JSON SBOM: the image, fivespot, each Debian package, each wheel.

    Raises ValueError when the document does not validate against the CycloneDX schema."""
    image, source = inputs.image, inputs.source
    root_ref = image_purl(image)
    root = Component(type=ComponentType.CONTAINER, name=image.repository, version=image.tag,
                     bom_ref=root_ref, purl=PackageURL.from_string(root_ref),
                     hashes=_sha256(image.manifest_digest.removeprefix("sha256:")))
    fivespot_ref = pypi_purl("fivespot", source.version)
    fivespot = Component(
        type=ComponentType.APPLICATION, name="fivespot", version=source.version,
        bom_ref=fivespot_ref, purl=PackageURL.from_string(fivespot_ref),
        hashes=_sha256(inputs.fivespot_wheel.sha256),
        licenses=[LicenseExpression(source.license)],
        external_references=[ExternalReference(type=ExternalReferenceType.VCS,
                                               url=XsUri(source.repository),
                                               comment=f"revision {source.revision}")])
    debs = [_component(deb_purl(p, inputs.distro), p.name, p.version, p.sha256)
            for p in inputs.debian]
    wheels = [_component(pypi_purl(w.name, w.version), w.name, w.version, w.sha256)
              for w in inputs.wheels]
    tool = Component(type=ComponentType.LIBRARY, name="cyclonedx-python-lib",
                     version=installed_version("cyclonedx-python-lib"))
    bom = Bom(
        serial_number=uuid.uuid5(uuid.NAMESPACE_URL, root_ref),
        metadata=BomMetaData(component=root, tools=ToolRepository(components=[tool]),
                             timestamp=dt.datetime.fromtimestamp(image.created, dt.timezone.utc)),
        components=[fivespot, *debs, *wheels])
    bom.register_dependency(root, [fivespot, *debs])
    bom.register_dependency(fivespot, wheels)
    text = JsonV1Dot6(bom).output_as_string(indent=2)
    error = JsonStrictValidator(CYCLONEDX_SCHEMA).validate_str(text)
    if error is not None:
        raise ValueError(f"the SBOM does not validate against CycloneDX "
                         f"{CYCLONEDX_SCHEMA.to_version()}: {error}")
    return (text + "\n").encode()


def _component(purl: str, name: str, version: str, sha256: str) -> Component:
    return Component(type=ComponentType.LIBRARY, name=name, version=version, bom_ref=purl,
                     purl=PackageURL.from_string(purl), hashes=_sha256(sha256))


# --- the provenance ----------------------------------------------------------------------------


def provenance(inputs: Inputs, sbom_name: str, sbom_sha256: str) -> bytes:
    """An in-toto Statement v1 whose predicate is SLSA Provenance v1: the image's digests as its
    subjects, the source and revision as its external parameters, each input with its digest, and
    the SBOM (`sbom_name`, `sbom_sha256`) and fivespot's wheel as byproducts."""
    image, source = inputs.image, inputs.source
    statement: dict[str, Any] = {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": image.repository,
             "digest": {"sha256": image.manifest_digest.removeprefix("sha256:")},
             "annotations": {"tag": image.tag}},
            {"name": image.archive_name, "digest": {"sha256": image.archive_sha256}},
        ],
        "predicateType": PROVENANCE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "source": f"git+{source.repository}",
                    "revision": source.revision,
                },
                "internalParameters": {
                    "platform": image.platform,
                    "sourceDateEpoch": image.created,
                },
                "resolvedDependencies": [
                    _source_descriptor(source),
                    *({"uri": deb_purl(p, inputs.distro), "name": p.filename.rsplit("/", 1)[-1],
                       "digest": {"sha256": p.sha256}} for p in inputs.debian),
                    *({"uri": pypi_purl(w.name, w.version), "digest": {"sha256": w.sha256}}
                      for w in inputs.wheels),
                    *({"uri": pypi_purl(w.name, w.version), "digest": {"sha256": w.sha256},
                       "annotations": {"usedFor": "building fivespot's wheel; not in the image"}}
                      for w in inputs.build_backend),
                ],
            },
            "runDetails": {
                "builder": {"id": BUILDER_ID, "version": dict(sorted(inputs.tools.items()))},
                "byproducts": [
                    {"name": sbom_name, "digest": {"sha256": sbom_sha256},
                     "mediaType": SBOM_MEDIA_TYPE},
                    {"name": inputs.fivespot_wheel.file_name,
                     "digest": {"sha256": inputs.fivespot_wheel.sha256}},
                ],
            },
        },
    }
    return (json.dumps(statement, indent=2, ensure_ascii=False) + "\n").encode()


def _source_descriptor(source: Source) -> dict[str, Any]:
    commit = source.commit
    if commit is None:
        return {"uri": f"git+{source.repository}", "annotations": {
            "revision": source.revision,
            "note": "built from a work tree with uncommitted changes: no commit to name"}}
    return {"uri": f"git+{source.repository}@{commit}", "digest": {"gitCommit": commit}}
