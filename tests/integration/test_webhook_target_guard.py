"""The target guard as the second lock, through the real API server: with the capacity identity's
RBAC widened by hand to `*` on the consumer kind and its subresources, every write other than the
allowlisted field is refused, in every namespace, and each refusal says why.

Setup: the compiled example installed as in `test_webhook_admission` (the webhook running as its
own ServiceAccount, called by the API server over TLS), plus a ClusterRole granting the capacity
identity every verb on `virtualmachinepools`, `/status` and `/scale` — what someone widening the
compiled ClusterRole by hand would do. RBAC then allows everything below; only the webhook stands
between the identity and the object.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from kubernetes import client

from fivespot.runtime.kube import MERGE_PATCH, ApiError, request
from fivespot.devcluster.clients import client_as_service_account
from fivespot.devcluster.kubectl import kubectl
from tests.integration.test_control_plane_is_real import eventually
from tests.integration.test_webhook_admission import (  # noqa: F401  (a module-scoped fixture)
    CAPACITY_SA,
    INSTALL_NS,
    TENANT,
    VMP,
    Installed,
    denial,
    installed,
)

GUARD_PREFIX: Final = 'admission webhook "target-guard.5spot.finos.org" denied the request: target-guard: '
API_VERSION: Final = f"{VMP[0]}/{VMP[1]}"
JSON_PATCH: Final = "application/json-patch+json"
APPLY: Final = "application/apply-patch+yaml"


@pytest.fixture(scope="module")
def widened(installed: Installed, kubeconfig: Path) -> Iterator[client.CustomObjectsApi]:
    """The capacity identity with `*` on the consumer kind and its subresources, cluster-wide."""
    rbac = client.RbacAuthorizationV1Api(installed.admin)
    name = f"widened-by-hand-{uuid.uuid4().hex[:6]}"
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": [{
        "apiGroups": [VMP[0]], "verbs": ["*"],
        "resources": [VMP[2], f"{VMP[2]}/status", f"{VMP[2]}/scale"]}]})
    rbac.create_cluster_role_binding({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": CAPACITY_SA, "namespace": INSTALL_NS}]})
    capacity = client_as_service_account(kubeconfig, INSTALL_NS, CAPACITY_SA, create=False)
    as_capacity = client.CustomObjectsApi(capacity)
    core = client.CoreV1Api(installed.admin)
    for namespace in (INSTALL_NS, "kube-system"):
        try:
            core.create_namespace({"metadata": {"name": namespace}})
        except client.ApiException as error:
            if error.status != 409:
                raise
    try:
        # RBAC reaches the authorizer through its informer: wait until a status write is decided
        # by admission rather than refused by RBAC (this one reaches the guard on every version).
        probe = _pool(installed, TENANT)

        def authorized() -> bool | None:
            text = denial(lambda: as_capacity.patch_namespaced_custom_object_status(
                *VMP[:2], TENANT, VMP[2], probe, {"status": {"inUse": 1}}))
            return True if text is None or "target-guard" in text else None

        eventually(authorized)
        yield as_capacity
    finally:
        capacity.close()
        rbac.delete_cluster_role_binding(name)
        rbac.delete_cluster_role(name)


def _pool(installed: Installed, namespace: str) -> str:
    name = f"pool-{uuid.uuid4().hex[:6]}"
    installed.objects.create_namespaced_custom_object(*VMP[:2], namespace, VMP[2], {
        "apiVersion": API_VERSION, "kind": "VirtualMachinePool",
        "metadata": {"name": name, "namespace": namespace, "labels": {"team": "a"}},
        "spec": {"warmReplicas": 0, "template": {"image": "sandbox:1"}}})
    installed.objects.patch_namespaced_custom_object_status(
        *VMP[:2], namespace, VMP[2], name, {"status": {"inUse": 0}})
    return name


def _read(installed: Installed, namespace: str, name: str) -> dict[str, Any]:
    return dict(installed.objects.get_namespaced_custom_object(*VMP[:2], namespace, VMP[2], name))


def _refused(call: Callable[[], object]) -> str:
    try:
        message = denial(call)
    except ApiError as error:  # the raw requests of `fivespot.runtime.kube`
        message = error.message
    assert message is not None, "the write went through"
    assert message.startswith(GUARD_PREFIX), message
    return message[len(GUARD_PREFIX):]


# --- subresources -------------------------------------------------------------------------------


def test_status_writes_by_the_capacity_identity_are_refused_by_patch_and_by_put(
        installed: Installed, widened: client.CustomObjectsApi) -> None:
    name = _pool(installed, TENANT)
    before = _read(installed, TENANT, name)
    patched = _refused(lambda: widened.patch_namespaced_custom_object_status(
        *VMP[:2], TENANT, VMP[2], name, {"status": {"inUse": 9}}))
    assert patched.startswith(f"the capacity controller may not write the status subresource of "
                              f"VirtualMachinePool {TENANT}/{name}; it may only change "
                              "spec.warmReplicas on the object itself")
    replaced = {**before, "status": {"inUse": 9}}
    _refused(lambda: widened.replace_namespaced_custom_object_status(
        *VMP[:2], TENANT, VMP[2], name, replaced))
    assert _read(installed, TENANT, name)["status"] == {"inUse": 0}


def test_scale_writes_by_the_capacity_identity_are_refused_by_patch_and_by_put(
        installed: Installed, widened: client.CustomObjectsApi) -> None:
    name = _pool(installed, TENANT)
    patched = _refused(lambda: widened.patch_namespaced_custom_object_scale(
        *VMP[:2], TENANT, VMP[2], name, {"spec": {"replicas": 5}}))
    assert patched.startswith("the capacity controller may not write the scale subresource of "
                              f"VirtualMachinePool {TENANT}/{name}")
    scale = widened.get_namespaced_custom_object_scale(*VMP[:2], TENANT, VMP[2], name)
    scale["spec"]["replicas"] = 6
    _refused(lambda: widened.replace_namespaced_custom_object_scale(
        *VMP[:2], TENANT, VMP[2], name, scale))
    assert _read(installed, TENANT, name)["spec"]["warmReplicas"] == 0


# --- managedFields ------------------------------------------------------------------------------


def test_wiping_or_forging_field_ownership_is_refused_and_the_ownership_kept(
        installed: Installed, widened: client.CustomObjectsApi) -> None:
    name = _pool(installed, TENANT)
    owners = _read(installed, TENANT, name)["metadata"]["managedFields"]
    wiped = _refused(lambda: widened.patch_namespaced_custom_object(
        *VMP[:2], TENANT, VMP[2], name, {"metadata": {"managedFields": [{}]}}))
    assert wiped.startswith("the capacity controller may change only spec.warmReplicas of "
                            f"VirtualMachinePool {TENANT}/{name}, but this request also changes "
                            "metadata.managedFields")
    assert "field ownership" in wiped
    forged = [{"manager": "fivespot-capacity-controller", "operation": "Update",
               "apiVersion": API_VERSION, "fieldsType": "FieldsV1",
               "fieldsV1": {"f:spec": {"f:template": {}, "f:warmReplicas": {}}}}]
    _refused(lambda: widened.patch_namespaced_custom_object(
        *VMP[:2], TENANT, VMP[2], name, {"metadata": {"managedFields": forged}}))
    after = _read(installed, TENANT, name)["metadata"]["managedFields"]
    assert [(m["manager"], m.get("fieldsV1")) for m in after] == \
           [(m["manager"], m.get("fieldsV1")) for m in owners]


# --- the patch types: the guard judges what a write changes, not how it is sent -----------------


def _patch(api: client.ApiClient, namespace: str, name: str, body: Any, content_type: str,
           **query: str) -> None:
    request(api, "PATCH", f"/apis/{VMP[0]}/{VMP[1]}/namespaces/{namespace}/{VMP[2]}/{name}",
            body=body, content_type=content_type, query=query or None)


def _apply(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "VirtualMachinePool",
            "metadata": {"name": name, "namespace": TENANT}, "spec": spec}


def test_a_merge_patch_a_json_patch_and_an_apply_of_only_the_field_are_each_admitted(
        installed: Installed, widened: client.CustomObjectsApi) -> None:
    api, name = widened.api_client, _pool(installed, TENANT)
    widened.patch_namespaced_custom_object(*VMP[:2], TENANT, VMP[2], name,
                                           {"spec": {"warmReplicas": 3}})
    _patch(api, TENANT, name, [{"op": "replace", "path": "/spec/warmReplicas", "value": 4}],
           JSON_PATCH)
    assert _read(installed, TENANT, name)["spec"]["warmReplicas"] == 4
    _patch(api, TENANT, name, _apply(name, {"warmReplicas": 5}), APPLY,
           fieldManager="fivespot-capacity-controller", force="true")
    after = _read(installed, TENANT, name)
    assert after["spec"] == {"warmReplicas": 5, "template": {"image": "sandbox:1"}}
    assert after["metadata"]["labels"] == {"team": "a"}
    json_other = _refused(lambda: _patch(
        api, TENANT, name, [{"op": "replace", "path": "/spec/template/image", "value": "evil:1"}],
        JSON_PATCH))
    assert "also changes spec.template.image" in json_other
    _refused(lambda: _patch(api, TENANT, name, _apply(name, {
        "warmReplicas": 5, "template": {"image": "evil:1"}}), APPLY,
        fieldManager="fivespot-capacity-controller", force="true"))
    assert _read(installed, TENANT, name)["spec"]["template"] == {"image": "sandbox:1"}


def test_a_target_created_with_only_the_field_takes_the_controllers_write(
        installed: Installed, widened: client.CustomObjectsApi) -> None:
    """Its creator keeps owning `spec` itself, re-encoded by the API server (found by make demo)."""
    name = f"bare-{uuid.uuid4().hex[:6]}"
    installed.objects.create_namespaced_custom_object(*VMP[:2], TENANT, VMP[2], {
        "apiVersion": API_VERSION, "kind": "VirtualMachinePool",
        "metadata": {"name": name, "namespace": TENANT}, "spec": {"warmReplicas": 0}})
    widened.patch_namespaced_custom_object(*VMP[:2], TENANT, VMP[2], name,
                                           {"spec": {"warmReplicas": 4}},
                                           field_manager="fivespot-capacity-controller")
    assert _read(installed, TENANT, name)["spec"] == {"warmReplicas": 4}


@pytest.mark.parametrize("how", [
    ["create", "-f", "-"],
    ["apply", "-f", "-"],  # client-side apply: the last-applied annotation, kubectl-client-side-apply
    ["apply", "--server-side", "--field-manager=argocd-controller", "-f", "-"],  # as GitOps does
    ["apply", "--server-side", "--field-manager=flux", "-f", "-"],
])
def test_targets_made_by_each_usual_tool_take_the_controllers_writes_and_nothing_else(
        installed: Installed, widened: client.CustomObjectsApi, kubeconfig: Path,
        how: list[str]) -> None:
    name = f"made-{uuid.uuid4().hex[:6]}"
    manifest = json.dumps({"apiVersion": API_VERSION, "kind": "VirtualMachinePool",
                           "metadata": {"name": name, "namespace": TENANT, "labels": {"team": "a"}},
                           "spec": {"warmReplicas": 1, "template": {"image": "sandbox:1"}}})
    kubectl(kubeconfig, *how, stdin=manifest)
    for value in (5, 0, 7):  # open, hand back, reopen: each a write of the field alone
        widened.patch_namespaced_custom_object(*VMP[:2], TENANT, VMP[2], name,
                                               {"spec": {"warmReplicas": value}},
                                               field_manager="fivespot-capacity-controller")
        assert _read(installed, TENANT, name)["spec"]["warmReplicas"] == value
    _refused(lambda: widened.patch_namespaced_custom_object(
        *VMP[:2], TENANT, VMP[2], name, {"spec": {"template": {"image": "evil:1"}}}))


def test_an_apply_of_the_field_to_an_object_whose_ownership_is_untracked_is_admitted(
        installed: Installed, widened: client.CustomObjectsApi) -> None:
    """The API server then gives the object's other fields to `before-first-apply`."""
    name = _pool(installed, TENANT)
    _patch(installed.admin, TENANT, name, {"metadata": {"managedFields": [{}]}}, MERGE_PATCH)
    _patch(widened.api_client, TENANT, name, _apply(name, {"warmReplicas": 3}), APPLY,
           fieldManager="fivespot-capacity-controller", force="true")
    after = _read(installed, TENANT, name)
    assert after["spec"] == {"warmReplicas": 3, "template": {"image": "sandbox:1"}}
    assert "before-first-apply" in [m["manager"] for m in after["metadata"]["managedFields"]]


def test_the_api_servers_own_compaction_of_field_managers_is_not_the_identitys_change(
        installed: Installed, widened: client.CustomObjectsApi) -> None:
    """Past ten Update managers the API server folds the oldest into `ancient-changes`; a write
    of the field that triggers that fold is still only a write of the field."""
    name = _pool(installed, TENANT)
    for i in range(10):
        _patch(installed.admin, TENANT, name, {"metadata": {"annotations": {f"tool-{i}": "x"}}},
               MERGE_PATCH, fieldManager=f"tool-{i}")
    widened.patch_namespaced_custom_object(*VMP[:2], TENANT, VMP[2], name,
                                           {"spec": {"warmReplicas": 6}},
                                           field_manager="fivespot-capacity-controller")
    managers = [m["manager"] for m in _read(installed, TENANT, name)["metadata"]["managedFields"]]
    assert "ancient-changes" in managers
    assert _read(installed, TENANT, name)["spec"]["warmReplicas"] == 6


# --- every namespace ----------------------------------------------------------------------------


@pytest.mark.parametrize("namespace", [INSTALL_NS, "kube-system"])
def test_the_capacity_identity_is_guarded_in_the_install_namespace_and_kube_system_too(
        installed: Installed, widened: client.CustomObjectsApi, namespace: str) -> None:
    name = _pool(installed, namespace)
    labels = _refused(lambda: widened.patch_namespaced_custom_object(
        *VMP[:2], namespace, VMP[2], name, {"metadata": {"labels": {"team": "b"}}}))
    assert f"VirtualMachinePool {namespace}/{name}, but this request also changes " \
           "metadata.labels.team" in labels
    _refused(lambda: widened.patch_namespaced_custom_object(
        *VMP[:2], namespace, VMP[2], name, {"spec": {"template": {"image": "evil:1"}}}))
    _refused(lambda: widened.delete_namespaced_custom_object(*VMP[:2], namespace, VMP[2], name))
    widened.patch_namespaced_custom_object(*VMP[:2], namespace, VMP[2], name,
                                           {"spec": {"warmReplicas": 2}})
    after = _read(installed, namespace, name)
    assert after["spec"] == {"warmReplicas": 2, "template": {"image": "sandbox:1"}}
    assert after["metadata"]["labels"] == {"team": "a"}


def test_with_the_webhook_stalled_everyone_else_still_writes_while_the_capacity_identity_fails_closed(
        installed: Installed, widened: client.CustomObjectsApi) -> None:
    """Recovery never waits on the webhook: the match condition keeps every other identity's
    writes away from it, in the install namespace as anywhere else."""
    name = _pool(installed, INSTALL_NS)
    group = installed.server.process.pid
    os.killpg(group, signal.SIGSTOP)
    try:
        started = time.monotonic()
        installed.objects.patch_namespaced_custom_object(
            *VMP[:2], INSTALL_NS, VMP[2], name, {"metadata": {"labels": {"team": "ops"}}})
        installed.objects.delete_namespaced_custom_object(*VMP[:2], INSTALL_NS, VMP[2], name)
        # A write that waited on the stalled webhook would take its whole timeoutSeconds (5 s,
        # the example's platform.yaml): these two together stay well under it, on a loaded
        # machine too.
        assert time.monotonic() - started < 5, "an admin's write waited for the webhook"
        other = _pool(installed, INSTALL_NS)
        failed = denial(lambda: widened.patch_namespaced_custom_object(
            *VMP[:2], INSTALL_NS, VMP[2], other, {"spec": {"warmReplicas": 1}}))
        assert failed is not None and "target-guard.5spot.finos.org" in failed, failed
    finally:
        os.killpg(group, signal.SIGCONT)
    assert _read(installed, INSTALL_NS, other)["spec"]["warmReplicas"] == 0
