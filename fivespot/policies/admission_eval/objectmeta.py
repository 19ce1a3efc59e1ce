"""The API server's checks of a custom resource's labels, annotations and finalizers.

apimachinery validates every object's metadata before its
schema: on a create `ValidateObjectMetaAccessor`, on an update `ValidateObjectMetaAccessorUpdate`
(no finalizers there). A label key, an annotation key and a finalizer are "qualified names"
(`content.IsLabelKey`), a label value has its own form, and all annotations together may hold
at most 256 KiB. The messages are the server's (1.34 words them as util/validation did: `a
qualified name`, `characters`; the version's `label_key_noun` and `metadata_length_unit`).
The name's own check, in `crd`, says `characters`: it goes through another package. A create also warns about each
finalizer that is not domain-qualified, as the CRD handler does (`generateWarningsFromObj`).

Not checked here: the namespace (the server's answer depends on whether it exists),
ownerReferences, managedFields and generation, which manifests do not carry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from fivespot.policies.admission_eval import gotext, structural
from fivespot.policies.admission_eval.regex import Pattern
from fivespot.policies.admission_eval.structural import FieldError
from fivespot.policies.kubeversions import KubernetesVersion

_KEY_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_KEY: Final = Pattern(f"^{_KEY_FMT}$")
_KEY_MESSAGE: Final = ("must consist of alphanumeric characters, '-', '_' or '.', and must start "
                       "and end with an alphanumeric character")
_KEY_MAX: Final = 63
_VALUE_FMT: Final = f"({_KEY_FMT})?"
_VALUE: Final = Pattern(f"^{_VALUE_FMT}$")
_VALUE_MESSAGE: Final = ("a valid label must be an empty string or consist of alphanumeric "
                         "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                         "character")
_VALUE_MAX: Final = 63
_SUBDOMAIN_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
SUBDOMAIN: Final = Pattern(f"^{_SUBDOMAIN_FMT}$")
"""A lowercase RFC 1123 subdomain: a label key's prefix, and (`crd`) an object's name."""
_SUBDOMAIN_MAX: Final = 253
ANNOTATIONS_MAX_BYTES: Final = 256 * 1024
_ORPHAN, _FOREGROUND = "orphan", "foregroundDeletion"
_STANDARD_FINALIZERS: Final = frozenset({_ORPHAN, _FOREGROUND, "kubernetes"})


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    """`content.RegexError`."""
    shown = "".join(f"{' or ' if i else ''}'{example}', " for i, example in enumerate(examples))
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


SUBDOMAIN_MESSAGE: Final = _regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character", _SUBDOMAIN_FMT, "example.com")


def _max_length(length: int, server: KubernetesVersion) -> str:
    return f"must be no more than {length} {server.metadata_length_unit}"


def _length(text: str) -> int:
    return len(text.encode("utf-8"))  # Go's len(): bytes


def _subdomain(value: str, server: KubernetesVersion) -> list[str]:
    """`content.IsDNS1123Subdomain`."""
    problems = [_max_length(_SUBDOMAIN_MAX, server)] if _length(value) > _SUBDOMAIN_MAX else []
    if not SUBDOMAIN.search(value):
        problems.append(SUBDOMAIN_MESSAGE)
    return problems


def qualified_name(value: str, server: KubernetesVersion) -> list[str]:
    """`content.IsLabelKey` (IsQualifiedName): an optional DNS subdomain prefix and `/`, then a
    name of at most 63 bytes."""
    parts = value.split("/")
    problems: list[str] = []
    if len(parts) > 2:
        return [f"{server.label_key_noun} {_regex_error(_KEY_MESSAGE, _KEY_FMT, 'MyName', 'my.name', '123-abc')}"
                " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        problems += (["prefix part must be non-empty"] if not prefix
                     else [f"prefix part {problem}" for problem in _subdomain(prefix, server)])
    if not name:
        problems.append("name part must be non-empty")
    elif _length(name) > _KEY_MAX:
        problems.append(f"name part {_max_length(_KEY_MAX, server)}")
    if not _KEY.search(name):
        problems.append(f"name part {_regex_error(_KEY_MESSAGE, _KEY_FMT, 'MyName', 'my.name', '123-abc')}")
    return problems


def _label_value(value: str, server: KubernetesVersion) -> list[str]:
    """`content.IsLabelValue`."""
    problems = [_max_length(_VALUE_MAX, server)] if _length(value) > _VALUE_MAX else []
    if not _VALUE.search(value):
        problems.append(_regex_error(_VALUE_MESSAGE, _VALUE_FMT, "MyValue", "my_value", "12345"))
    return problems


def _invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, structural.INVALID,
                      gotext.error_body(structural.INVALID, value, detail))


def errors(meta: Mapping[str, Any], create: bool, *, server: KubernetesVersion
           ) -> list[FieldError]:
    """The errors of the labels, annotations and (on a create) finalizers, in the server's order
    (its maps are walked in no fixed order; here in the order given), as `server` words them."""
    found: list[FieldError] = []
    labels = meta.get("labels")
    if isinstance(labels, Mapping):
        for key, value in labels.items():
            found += [_invalid("metadata.labels", key, p)
                      for p in qualified_name(str(key), server)]
            found += [_invalid("metadata.labels", value, p)
                      for p in _label_value(str(value), server)]
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping):
        for key in annotations:
            found += [_invalid("metadata.annotations", key, p)
                      for p in qualified_name(str(key).lower(), server)]
        size = sum(_length(str(k)) + _length(str(v)) for k, v in annotations.items())
        if size > ANNOTATIONS_MAX_BYTES:
            found.append(FieldError("metadata.annotations", structural.TOO_LONG, gotext.error_body(
                structural.TOO_LONG, gotext.OMIT,
                f"may not be more than {ANNOTATIONS_MAX_BYTES} bytes")))
    finalizers = meta.get("finalizers")
    if create and isinstance(finalizers, list):
        for finalizer in finalizers:
            found += [_invalid("metadata.finalizers", finalizer, p)
                      for p in qualified_name(str(finalizer), server)]
        if _ORPHAN in finalizers and _FOREGROUND in finalizers:
            found.append(_invalid("metadata.finalizers", list(finalizers),
                                  f"finalizer {_ORPHAN} and {_FOREGROUND} cannot be both set"))
    return found


def warnings(meta: Mapping[str, Any], old_meta: Mapping[str, Any] | None,
             server: KubernetesVersion) -> list[str]:
    """The CRD handler's warnings for the finalizers a request adds, sorted: each problem of its
    name, and a name that is not domain-qualified."""
    finalizers = meta.get("finalizers")
    if not isinstance(finalizers, list):
        return []
    before = (old_meta or {}).get("finalizers")
    added = sorted(set(map(str, finalizers)) - set(map(str, before if isinstance(before, list) else [])))
    found = []
    for finalizer in added:
        where = f"metadata.finalizers: {gotext.quote(finalizer)}"
        found += [f"{where}: {problem}" for problem in qualified_name(finalizer, server)]
        if "/" not in finalizer and finalizer not in _STANDARD_FINALIZERS:
            path = " including a path (/)" if "." in finalizer else ""
            found.append(f"{where}: prefer a domain-qualified finalizer name{path} to avoid "
                         "accidental conflicts with other finalizer writers")
    return found
