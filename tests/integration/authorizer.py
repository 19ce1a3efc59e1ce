"""Waiting for RBAC to be in force. The API server's authorizer reads Roles and bindings through
its informers, so an apply is decided on a moment later, not at once (`kubectl auth can-i` and
real requests alike). `wait_in_force` asks, with a SubjectAccessReview per applied binding and
rule, until every binding grants its rules to its ServiceAccounts: a check of propagation only,
derived from the objects applied, never from what a test expects them to grant."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from kubernetes import client

Attributes = dict[str, str]


def _checks(objects: Iterable[dict[str, Any]]) -> Iterator[tuple[str, Attributes]]:
    objects = list(objects)
    roles = {(o["kind"], o["metadata"].get("namespace") if o["kind"] == "Role" else None,
              o["metadata"]["name"]): o for o in objects if o["kind"] in ("Role", "ClusterRole")}
    for binding in objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        namespace = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        ref = binding["roleRef"]
        role = roles.get((ref["kind"], namespace if ref["kind"] == "Role" else None, ref["name"]))
        if role is None:  # not applied with these objects: nothing to wait for here
            continue
        for rule in role.get("rules") or []:
            if not rule.get("resources") or "*" in rule["verbs"] + rule["resources"]:
                continue
            resource, _, subresource = rule["resources"][0].partition("/")
            attributes = {"group": rule.get("apiGroups", [""])[0], "resource": resource,
                          "verb": rule["verbs"][0]}
            if subresource:
                attributes["subresource"] = subresource
            if rule.get("resourceNames"):
                attributes["name"] = rule["resourceNames"][0]
            if namespace:
                attributes["namespace"] = namespace
            for subject in binding.get("subjects") or []:
                if subject["kind"] == "ServiceAccount":
                    yield f"system:serviceaccount:{subject['namespace']}:{subject['name']}", attributes


def wait_in_force(admin: client.ApiClient, objects: Iterable[dict[str, Any]],
                  timeout_s: float = 60.0) -> None:
    """Until every applied binding's rules are allowed to its ServiceAccount subjects."""
    reviews = client.AuthorizationV1Api(admin)
    deadline = time.monotonic() + timeout_s
    for user, attributes in _checks(objects):
        while not reviews.create_subject_access_review(client.V1SubjectAccessReview(
                spec=client.V1SubjectAccessReviewSpec(user=user, resource_attributes=attributes))
        ).status.allowed:
            if time.monotonic() > deadline:
                raise AssertionError(f"RBAC not in force within {timeout_s}s: {user} {attributes}")
            time.sleep(0.1)

