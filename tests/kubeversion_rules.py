"""CRD rules that one supported Kubernetes version accepts and another refuses at install time,
shared by the compiler's unit tests (which versions `fivespot compile` says refuse them) and the
integration test that installs them on each version's real API server (which do)."""

from __future__ import annotations

from typing import Final

from fivespot.compiler.emit.base import CRDS, Artifact

NAME_RULE: Final = "self.spec.prefixes.exists(p, self.metadata.name.contains(p))"
"""Cheap where metadata.name is at most 253 bytes (1.37's estimator), over budget where it may be
as long as a request (1.34 to 1.36)."""
LISTS_RULE: Final = "self.spec.prefixes.distinct().size() == self.spec.prefixes.size()"
"""Calls the CEL lists extension, which API servers offer new expressions from 1.35 on."""
CHEAP_RULE: Final = "self.spec.prefixes.size() <= 100"
"""Every version accepts it."""


def crd_with_rule(rule: str, name: str = "gates") -> Artifact:
    """A CRD `NAME.example.com` whose root carries `rule`, over a bounded list of bounded
    prefixes."""
    prefixes = {"type": "array", "maxItems": 100, "items": {"type": "string", "maxLength": 64}}
    schema = {"type": "object", "x-kubernetes-validations": [{"rule": rule}],
              "properties": {"spec": {"type": "object", "properties": {"prefixes": prefixes}}}}
    return Artifact(CRDS, f"{CRDS}/{name}.example.com.yaml", {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{name}.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": name.capitalize()[:-1], "plural": name},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": schema}}]}})
