"""The author of a ScheduledCapacity or a ScheduledMachine must be allowed the write a controller
would make for them, through a real API server (security review F8, decision 0024).

A ServiceAccount that may create ScheduledCapacities in a tenant namespace, but not patch the
Deployment it names, is refused with the policy's message; once a RoleBinding grants it patch on
Deployments, the same create is admitted. Updates that ask nothing new of the controller (the
kill switch, lowering the value) are admitted without the grant, raising the value is not.
Likewise a ScheduledMachine whose author may not create its bootstrap kind is refused until they
may. The server's message is the one `fivespot check --user-roles` gives offline with the same
Roles, and every policy compiled from these configs type-checks without warnings.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from fivespot.compiler.check.objects import check
from fivespot.devcluster import localrun
from fivespot.devcluster.clients import admin_client, client_as_service_account
from fivespot.devcluster.controlplane import ControlPlane
from fivespot.devcluster.kubectl import apply, kubectl, wait_established
from fivespot.runtime import kube
from tests.integration.authorizer import wait_in_force
from tests.integration.capacity_world import SCAP, World, allow_deployments, path
from tests.integration.conftest import own_control_plane
from tests.integration.machine_world import CAPI_CRDS, SM, TRADING_DESK
from tests.integration.test_compiled_example_installs import assert_type_checked

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent-sandbox" / "config"
NS = "agents"
AUTHOR = "author"


def _role(name: str, namespace: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": namespace}, "rules": rules}


def _binding(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": AUTHOR, "namespace": namespace}]}


def _grant(kubeconfig: Path, admin: client.ApiClient, work: Path,
           role: dict[str, Any]) -> None:
    """Apply the Role and a RoleBinding of it to the author, and wait until RBAC says so."""
    meta = role["metadata"]
    objects = [role, _binding(meta["name"], meta["namespace"])]
    manifest = work / f"{meta['name']}.yaml"
    manifest.write_text(yaml.safe_dump_all(objects))
    kubectl(kubeconfig, "apply", "-f", str(manifest))
    wait_in_force(admin, objects)


def _revoke(kubeconfig: Path, admin: client.ApiClient, role: dict[str, Any],
            attributes: dict[str, str]) -> None:
    """Delete the RoleBinding, and wait until RBAC no longer allows `attributes`."""
    meta = role["metadata"]
    kubectl(kubeconfig, "delete", "rolebinding", meta["name"], "-n", meta["namespace"])
    user = f"system:serviceaccount:{meta['namespace']}:{AUTHOR}"
    reviews = client.AuthorizationV1Api(admin)
    deadline = time.monotonic() + 60
    while reviews.create_subject_access_review(client.V1SubjectAccessReview(
            spec=client.V1SubjectAccessReviewSpec(user=user, resource_attributes=attributes))
    ).status.allowed:
        assert time.monotonic() < deadline, f"RBAC still allows {attributes} to {user}"
        time.sleep(0.1)


def _denied(create: Any) -> kube.ApiError:
    with pytest.raises(kube.ApiError) as refused:
        create()
    return refused.value


def _until_in_force(api: client.ApiClient, path: str, body: dict[str, Any]) -> None:
    """Wait until a dry-run create of `body` is refused: a policy just applied reaches the API
    server's admission through an informer, a moment after the create of it returned (seconds on
    a loaded machine), and the first real create must meet the policy, not the gap."""
    deadline = time.monotonic() + 60
    while True:
        try:
            kube.request(api, "POST", path, body=body, query={"dryRun": "All"})
        except kube.ApiError:
            return
        assert time.monotonic() < deadline, f"no policy refused a create at {path} within 60 s"
        time.sleep(0.2)


def _offline_message(out: Path, obj: dict[str, Any], roles: list[dict[str, Any]],
                     work: Path) -> str | None:
    """What `fivespot check --user-roles` says of creating `obj` by a user holding `roles`."""
    objects, roles_file = work / "object.yaml", work / "roles.yaml"
    objects.write_text(yaml.safe_dump(obj))
    roles_file.write_text(yaml.safe_dump_all(roles))
    (result,) = check([out], [objects], user_roles=roles_file, cache=False)
    return result.verdict.status.message if result.verdict.status is not None else None


# --- ScheduledCapacity ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def capacity_plane(module_plane: ControlPlane, module_admin: client.ApiClient,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """The example with a Deployment consumer for tenant `agents`, installed; (kubeconfig, OUT)."""
    work = tmp_path_factory.mktemp("author-rights")
    config = work / "config"
    shutil.copytree(EXAMPLE, config)
    allow_deployments(config, NS)
    out = work / "out"
    localrun.compile_and_install(module_plane.kubeconfig, out, config)
    yield module_plane.kubeconfig, out


def _scap(name: str, active_value: int, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": "open"},
                     "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "capacity": {"path": "spec.replicas", "activeValue": active_value}, **spec}}


def test_a_scheduledcapacity_is_admitted_only_when_its_author_may_patch_the_target(
        capacity_plane: tuple[Path, Path], module_admin: client.ApiClient, tmp_path: Path) -> None:
    kubeconfig, out = capacity_plane
    World(module_admin, NS).deployment("web")
    authoring = _role("scap-author", NS, [{"apiGroups": ["5spot.finos.org"],
                                           "resources": ["scheduledcapacities"],
                                           "verbs": ["create", "get", "update"]}])
    _grant(kubeconfig, module_admin, tmp_path, authoring)
    author = client_as_service_account(kubeconfig, NS, AUTHOR)
    scaps = path(SCAP, ns=NS)
    try:
        _until_in_force(author, scaps, _scap("web", 2))
        refused = _denied(lambda: kube.request(author, "POST", scaps, body=_scap("web", 2)))
        assert refused.status == 403
        expected = ('scheduledcapacities.5spot.finos.org "web" is forbidden: '
                    "ValidatingAdmissionPolicy 'fivespot-scap-author-rights' with binding "
                    "'fivespot-scap-author-rights' denied request: fivespot-scap-author-rights: "
                    'you may not patch deployments.apps "web" in namespace agents, and this '
                    "ScheduledCapacity would have the capacity controller do it for you; ask for "
                    "a Role granting verbs [patch] on resources [deployments] in apiGroups "
                    "[apps], bound to you in namespace agents")
        assert refused.message == expected
        assert _offline_message(out, _scap("web", 2), [authoring], tmp_path) == expected
        assert_type_checked(module_admin, ["fivespot-scap-author-rights", "fivespot-scap-tenancy",
                                            "fivespot-scap-schedule-kinds",
                                            "fivespot-tenant-limits"])

        patching = _role("web-patcher", NS, [{"apiGroups": ["apps"], "resources": ["deployments"],
                                              "verbs": ["patch"]}])
        _grant(kubeconfig, module_admin, tmp_path, patching)
        kube.request(author, "POST", scaps, body=_scap("web", 2))
        assert _offline_message(out, _scap("other", 2), [authoring, patching], tmp_path) is None

        # Without the grant again, the author may still stop it and lower it, not raise it.
        _revoke(kubeconfig, module_admin, patching, {"group": "apps", "resource": "deployments",
                                                     "verb": "patch", "namespace": NS})

        def update(change: dict[str, Any]) -> dict[str, Any]:
            stored = kube.request(author, "GET", path(SCAP, "web", ns=NS))
            stored["spec"].update(change)
            return kube.request(author, "PUT", path(SCAP, "web", ns=NS), body=stored)

        assert update({"killSwitch": True})["spec"]["killSwitch"] is True
        raised = _denied(lambda: update({"capacity": {"path": "spec.replicas", "activeValue": 3}}))
        assert raised.status == 403 and "fivespot-scap-author-rights: you may not patch" in \
            raised.message
        lifted = _denied(lambda: update({"killSwitch": False}))
        assert "fivespot-scap-author-rights: you may not patch" in lifted.message
        lowered = update({"capacity": {"path": "spec.replicas", "activeValue": 1}})
        assert lowered["spec"]["capacity"]["activeValue"] == 1
    finally:
        author.close()


# --- ScheduledMachine ----------------------------------------------------------------------------


def _machine(name: str) -> dict[str, Any]:
    return {"apiVersion": "5spot.finos.org/v1beta1", "kind": "ScheduledMachine",
            "metadata": {"name": name, "namespace": "trading"},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": "rack"},
                     "clusterName": "desk-cluster",
                     "bootstrapSpec": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2",
                                       "kind": "KubeadmConfig",
                                       "spec": {"preKubeadmCommands": ["echo joined"]}},
                     "infrastructureSpec": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                                            "kind": "DevMachine",
                                            "spec": {"backend": {"docker": {}}}}}}


def test_a_scheduledmachine_is_admitted_only_when_its_author_may_create_what_it_embeds(
        tmp_path: Path) -> None:
    with own_control_plane() as plane:
        kubeconfig = plane.kubeconfig
        for crd in sorted(CAPI_CRDS.glob("*.yaml")):
            apply(kubeconfig, crd)
        wait_established(kubeconfig, [c.stem.split("_", 1)[1] + "." + c.stem.split("_", 1)[0]
                                      for c in sorted(CAPI_CRDS.glob("*.yaml"))])
        localrun.ensure_namespaces(kubeconfig, {"trading"})
        out = tmp_path / "out"
        localrun.compile_and_install(kubeconfig, out, TRADING_DESK)
        admin = admin_client(kubeconfig)
        author = None
        try:
            authoring = _role("machine-author", "trading", [
                {"apiGroups": ["5spot.finos.org"], "resources": ["scheduledmachines"],
                 "verbs": ["create", "get"]},
                {"apiGroups": ["cluster.x-k8s.io"], "resources": ["machines"], "verbs": ["create"]},
                {"apiGroups": ["infrastructure.cluster.x-k8s.io"], "resources": ["devmachines"],
                 "verbs": ["create"]}])
            _grant(kubeconfig, admin, tmp_path, authoring)
            author = client_as_service_account(kubeconfig, "trading", AUTHOR)
            machines = kube.resource_path(*SM, namespace="trading")
            _until_in_force(author, machines, _machine("rack-1"))
            refused = _denied(lambda: kube.request(author, "POST", machines,
                                                   body=_machine("rack-1")))
            assert refused.status == 403
            expected = ('scheduledmachines.5spot.finos.org "rack-1" is forbidden: '
                        "ValidatingAdmissionPolicy 'fivespot-machine-author-rights' with binding "
                        "'fivespot-machine-author-rights' denied request: "
                        "fivespot-machine-author-rights: you may not create "
                        "kubeadmconfigs.bootstrap.cluster.x-k8s.io (spec.bootstrapSpec, a "
                        "KubeadmConfig) in namespace trading, and this ScheduledMachine would have "
                        "the machine controller do it for you; ask for a Role granting verbs "
                        "[create] on resources [kubeadmconfigs] in apiGroups "
                        "[bootstrap.cluster.x-k8s.io], bound to you in namespace trading")
            assert refused.message == expected
            assert _offline_message(out, _machine("rack-1"), [authoring], tmp_path) == expected
            assert_type_checked(admin, ["fivespot-machine-author-rights"])

            bootstrapping = _role("bootstrapper", "trading", [
                {"apiGroups": ["bootstrap.cluster.x-k8s.io"], "resources": ["kubeadmconfigs"],
                 "verbs": ["create"]}])
            _grant(kubeconfig, admin, tmp_path, bootstrapping)
            created = kube.request(author, "POST", machines, body=_machine("rack-1"))
            assert created["metadata"]["name"] == "rack-1"
        finally:
            if author is not None:
                author.close()
            admin.close()
