"""What `fivespot compile` says a targeted Kubernetes version would refuse, that version's real API
server refuses, and what it says it accepts, the server accepts: a CRD rule priced differently
by the versions' cost estimators, one calling a CEL library not every version offers, and one
every version takes. Runs against the control plane KUBERNETES_VERSION selects (make test runs it
on every supported version)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from fivespot.compiler import cel_preflight
from fivespot.compiler.repo import Repo
from fivespot.compiler.spec import Platform
from fivespot.policies import kubeversions
from tests.kubeversion_rules import CHEAP_RULE, LISTS_RULE, NAME_RULE, crd_with_rule

VERSION = kubeversions.selected()


def _repo_targeting(version: kubeversions.KubernetesVersion) -> Repo:
    platform = Platform.model_validate({
        "apiVersion": "config.5spot.finos.org/v1alpha1", "kind": "Platform",
        "metadata": {"name": "platform"},
        "spec": {"image": "example/fivespot:1", "minKubernetesVersion": version.minor,
                 "maxKubernetesVersion": version.minor}})
    return Repo(platform=platform, consumers=(), builtin_providers=(), custom_providers=(),
                tenants=(), fixtures=())


def _server_refusal(admin: client.ApiClient, crd: dict[str, Any]) -> str | None:
    """The API server's refusal of creating `crd` (dry run), or None when it accepts it."""
    try:
        client.ApiextensionsV1Api(admin).create_custom_resource_definition(crd, dry_run="All")
    except ApiException as error:
        assert error.status == 422, error.body
        return str(json.loads(error.body)["message"])
    return None


def test_the_control_plane_is_the_version_selected(admin: client.ApiClient) -> None:
    info = client.VersionApi(admin).get_code()
    assert info.git_version == f"v{VERSION.release}"


@pytest.mark.parametrize("rule", [NAME_RULE, LISTS_RULE, CHEAP_RULE],
                         ids=["cost-of-metadata-name", "lists-library", "cheap"])
def test_compile_refuses_a_crd_rule_exactly_where_this_api_server_refuses_it(
        admin: client.ApiClient, rule: str) -> None:
    artifact = crd_with_rule(rule, name=f"gates{uuid.uuid4().hex[:6]}s")
    ours = [d.message for d in cel_preflight.check(_repo_targeting(VERSION), [artifact])]
    theirs = _server_refusal(admin, artifact.obj)
    assert bool(ours) == (theirs is not None), (VERSION.minor, ours, theirs)
    if rule == NAME_RULE and theirs is not None:
        # the same estimate: the server's factor is the one compile reports
        factor = theirs.split("exceeds budget by factor of ")[1].split(" ")[0]
        assert f"exceeds budget by factor of {factor} " in ours[0], (ours, theirs)
    expected_refusal = {NAME_RULE: not VERSION.metadata_name_cost_cap,
                        LISTS_RULE: VERSION.minor == "1.34", CHEAP_RULE: False}[rule]
    assert (theirs is not None) == expected_refusal, (VERSION.minor, theirs)
