"""The Kubernetes versions fivespot supports, and everything that differs between them: one table.

fivespot reproduces the API server offline (`fivespot check`), refuses at compile time what an API
server would refuse at install time (`fivespot compile`), and tests both against a real
kube-apiserver built for each version (`tools/controlplane/kubernetes-MINOR/`). The servers differ
from one minor to the next in what they decide and how they word it; each such difference is a
field of `KubernetesVersion` here, named after the server's change, and the checker and compiler
read the field instead of comparing version numbers. Adding a minor is a row in `SUPPORTED` (and a
wrapper module written by `tools/controlplane/pin.py`), then the fidelity corpus against it.
"""

from __future__ import annotations

import os
import re
from typing import Final

from msgspec import Struct


Minor = tuple[int, int]
"""A Kubernetes minor as numbers, `(1, 35)`: how versions are compared, supported or not."""


class KubernetesVersion(Struct, frozen=True, kw_only=True):
    """One supported minor, and how its API server behaves where the minors differ."""

    minor: str
    """`1.35`."""
    release: str
    """The patch release the local control plane builds and the tests run
    (tools/controlplane/kubernetes-MINOR/go.mod; a unit test keeps the two equal)."""
    crd_rule_error_value: str
    """What a failed `x-kubernetes-validations` rule shows as the invalid value: `schema-type`
    (1.34 and older: the node's schema type, `Invalid value: "string": ...`) or `value` (1.35
    on: the value itself, objects and arrays omitted) — apiextensions' cel/validation.go."""
    numeric_format_ranges: bool
    """An integer field of format int32, or a number of format float, refuses values outside that
    type's range (1.36 on: kube-openapi passes the schema's type and format to its number
    validator); before, any int64 / float64 passes."""
    metadata_name_cost_cap: bool
    """CRD rule cost estimates bound `metadata.name` by 253 bytes and `metadata.generateName` by
    252 (1.37 on: apiextensions' model/schemas.go); before, both are as long as a request."""
    label_key_noun: str
    """What a malformed label key, annotation key or finalizer is called: `a qualified name`
    (1.34: apimachinery's util/validation.IsQualifiedName) or `a valid label key` (1.35 on:
    api/validate/content.IsLabelKey)."""
    metadata_length_unit: str
    """The unit of a label key's, label value's or key prefix's length limit: `characters`
    (1.34) or `bytes` (1.35 on; content.MaxLenError). Either way Go counts bytes."""

    @property
    def number(self) -> Minor:
        return minor_number(self.minor)

    @property
    def cel_compatibility(self) -> tuple[int, int]:
        """The CEL environment new expressions get: the libraries introduced up to the minor
        before this one (the server's `DefaultCompatibilityVersion`, so a rollback to the
        previous minor can still read everything written)."""
        major, minor = self.number
        return major, minor - 1

    def __str__(self) -> str:
        return self.minor


_UTIL_WORDING: Final = {"label_key_noun": "a qualified name", "metadata_length_unit": "characters"}
_CONTENT_WORDING: Final = {"label_key_noun": "a valid label key", "metadata_length_unit": "bytes"}

SUPPORTED: Final = (
    KubernetesVersion(minor="1.34", release="1.34.4", crd_rule_error_value="schema-type",
                      numeric_format_ranges=False, metadata_name_cost_cap=False, **_UTIL_WORDING),
    KubernetesVersion(minor="1.35", release="1.35.4", crd_rule_error_value="value",
                      numeric_format_ranges=False, metadata_name_cost_cap=False, **_CONTENT_WORDING),
    KubernetesVersion(minor="1.36", release="1.36.3", crd_rule_error_value="value",
                      numeric_format_ranges=True, metadata_name_cost_cap=False, **_CONTENT_WORDING),
    KubernetesVersion(minor="1.37", release="1.37.2", crd_rule_error_value="value",
                      numeric_format_ranges=True, metadata_name_cost_cap=True, **_CONTENT_WORDING),
)
"""Oldest first: the oldest and newest minors the Go module proxy serves that users still run."""



class CelLibrary(Struct, frozen=True):
    """A CEL library the API server offers new expressions from one version on (apiserver's
    cel/environment/base.go: introduced at `introduced`, usable where a server's
    `cel_compatibility` has reached it), and the functions fivespot's engine knows it by."""

    name: str
    introduced: tuple[int, int]
    functions: frozenset[str]

    def offered_by(self, version: KubernetesVersion) -> bool:
        return version.cel_compatibility >= self.introduced

    @property
    def first_minor(self) -> str:
        """The first API server minor that offers it to new expressions."""
        return f"{self.introduced[0]}.{self.introduced[1] + 1}"


CEL_LIBRARIES: Final = (
    CelLibrary("the CEL lists extension (ext.Lists v3)", (1, 34), frozenset({
        "lists.range", "distinct", "flatten", "reverse", "slice", "sort",
        "@sortByAssociatedKeys", "first", "last"})),
)
"""The libraries fivespot's CEL engine has that some supported version lacks for new expressions
(a CRD or policy written to it); every older library (strings v2, sets, IP, CIDR, format,
quantity, two-variable comprehensions, semver) is offered by every supported version."""

BY_MINOR: Final = {version.minor: version for version in SUPPORTED}
OLDEST: Final = SUPPORTED[0]
NEWEST: Final = SUPPORTED[-1]
DEFAULT: Final = BY_MINOR["1.35"]
"""The version `make test`, `make cluster` and `fivespot dev` run unless KUBERNETES_VERSION says
otherwise: the one the whole suite proves; the others get the version-dependent parts."""

ENVIRONMENT_VARIABLE: Final = "KUBERNETES_VERSION"
TARGETS_ANNOTATION: Final = "5spot.finos.org/kubernetes-versions"
"""On each compiled CRD: the versions the output targets (`1.34-1.37`), so `fivespot check` on that
output decides as the newest of them unless told otherwise."""
SUPPORTED_RANGE: Final = f"{OLDEST.minor} to {NEWEST.minor}"
_VERSION: Final = re.compile(r"^v?(1\.(\d+))(?:\.\d+)?$")


class UnsupportedVersion(ValueError):
    """A Kubernetes version outside the supported range, or not a version at all."""


def _parse(text: str) -> re.Match[str]:
    """The one reading of a version's text (`1.34`, `v1.34`, `1.34.4`): group 1 the minor as
    written (`1.34`), group 2 its minor number; raises UnsupportedVersion."""
    found = _VERSION.match(text.strip())
    if found is None:
        raise UnsupportedVersion(
            f"Kubernetes version {text!r} is not MAJOR.MINOR (e.g. {DEFAULT.minor}); "
            f"supported: {SUPPORTED_RANGE}")
    return found


def minor_number(text: str) -> Minor:
    """`(1, 34)` of `1.34` (or `v1.34`, `1.34.4`), supported or not; raises UnsupportedVersion
    when `text` is not a version."""
    return 1, int(_parse(text).group(2))


def resolve(text: str) -> KubernetesVersion:
    """The supported minor `text` names (`1.34`, `v1.34`, `1.34.4`); raises UnsupportedVersion
    naming the supported range."""
    found = _parse(text)
    version = BY_MINOR.get(found.group(1))
    if version is None:
        raise UnsupportedVersion(
            f"Kubernetes {found.group(1)} is not supported: fivespot supports {SUPPORTED_RANGE} "
            f"({', '.join(v.minor for v in SUPPORTED)})")
    return version


def selected() -> KubernetesVersion:
    """The version KUBERNETES_VERSION names for the local control plane and the tests, else
    DEFAULT; raises UnsupportedVersion."""
    text = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
    return resolve(text) if text else DEFAULT


def in_range(oldest: Minor, newest: Minor) -> tuple[KubernetesVersion, ...]:
    """The supported versions from `oldest` to `newest` (either may be outside)."""
    return tuple(v for v in SUPPORTED if oldest <= v.number <= newest)


def targets_text(versions: tuple[KubernetesVersion, ...]) -> str:
    """`1.34-1.37` (or `1.35` for one version): the TARGETS_ANNOTATION value."""
    first, last = versions[0].minor, versions[-1].minor
    return first if first == last else f"{first}-{last}"


def newest_target(text: str) -> KubernetesVersion:
    """The newest version a TARGETS_ANNOTATION value names; raises UnsupportedVersion."""
    return resolve(text.rpartition("-")[2])
