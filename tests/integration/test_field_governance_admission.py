"""One field, one governor at admission: the real API server calls the webhook over TLS, and a
second ScheduledCapacity on a field is refused with the webhook's message — the same field, a
prefix-related path, the same object through another version, and an update moving onto it.

Setup as `test_webhook_admission` (the compiled example installed as GitOps would, the webhook
running as its own ServiceAccount, its Service rewritten to a local URL), with one change to the
config: the consumer allowlists `spec.template` and `spec.template.replicas` besides
`spec.warmReplicas`, so that two prefix-related paths both pass the policies and only the
field-governance rule stands between them.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo
from fivespot.devcluster.kubectl import install
from tests.integration.test_control_plane_is_real import eventually
from tests.integration.test_webhook_admission import (
    EXAMPLE,
    INSTALL_NS,
    SCAP,
    TENANT,
    _ensure_namespace,
    _rewrite_to_local_url,
    denial,
    free_port,
    serving,
)

pytestmark = pytest.mark.integration

PREFIX_PATHS: Final = ["spec.warmReplicas", "spec.template", "spec.template.replicas"]
HOOK: Final = 'admission webhook "field-governance.5spot.finos.org" denied the request: '


@pytest.fixture(scope="module")
def objects(kubeconfig: Path, admin: client.ApiClient,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[client.CustomObjectsApi]:
    work = tmp_path_factory.mktemp("field-governance")
    config = work / "config"
    shutil.copytree(EXAMPLE / "config", config)
    consumers = yaml.safe_load((config / "consumers.yaml").read_text())
    consumers["spec"]["capacityPaths"] = PREFIX_PATHS
    (config / "consumers.yaml").write_text(yaml.safe_dump(consumers))
    compiled = compile_repo(config)
    out = work / "out"
    write_tree(compiled.files, out)
    port = free_port()
    _rewrite_to_local_url(out, port)
    core = client.CoreV1Api(admin)
    for name in {TENANT, INSTALL_NS, *(n for t in compiled.repo.tenants for n in t.spec.namespaces)}:
        _ensure_namespace(core, name)
    install(kubeconfig, out, [EXAMPLE / "consumer" / "virtualmachinepools.yaml"])
    api = client.CustomObjectsApi(admin)
    with serving(kubeconfig, admin, out, port, ["--workers", "1"]):
        eventually(lambda: True if denial(lambda: api.create_namespaced_custom_object(
            *SCAP[:2], TENANT, SCAP[2], scap("sentinel", uuid.uuid4().hex), dry_run="All")) is None
            else None, timeout_s=60)
        yield api


def scap(name: str, pool: str, path: str = "spec.warmReplicas", version: str = "v1alpha1",
         **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
            "metadata": {"name": name, "namespace": TENANT},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": "window"},
                     "targetRef": {"apiVersion": f"pools.agents.example.com/{version}",
                                   "kind": "VirtualMachinePool", "name": pool},
                     "capacity": {"path": path, "activeValue": 4}, **spec}}


def _create(objects: client.CustomObjectsApi, body: dict[str, Any]) -> Callable[[], object]:
    return lambda: objects.create_namespaced_custom_object(*SCAP[:2], TENANT, SCAP[2], body)


def _wait_cached(objects: client.CustomObjectsApi, pool: str, path: str = "spec.warmReplicas") -> None:
    """Until the webhook's cache has the first governor (a moment after its create): a dry-run
    second governor on the same field is denied."""
    probe = scap(f"probe-{uuid.uuid4().hex[:6]}", pool, path)

    def seen() -> bool | None:
        message = denial(lambda: objects.create_namespaced_custom_object(
            *SCAP[:2], TENANT, SCAP[2], probe, dry_run="All"))
        return True if message and message.startswith(HOOK) else None
    eventually(seen, timeout_s=60)


def _denied(call: Callable[[], object]) -> str:
    message = denial(call)
    assert message is not None, "the second governor was admitted"
    assert message.startswith(HOOK), message
    return message


def test_a_second_governor_of_the_same_field_is_denied_naming_the_first_and_composition(
        objects: client.CustomObjectsApi) -> None:
    pool = f"pool-{uuid.uuid4().hex[:6]}"
    objects.create_namespaced_custom_object(*SCAP[:2], TENANT, SCAP[2], scap("office-hours-" + pool, pool))
    _wait_cached(objects, pool)
    message = _denied(_create(objects, scap("override-" + pool, pool)))
    assert message.startswith(
        f"{HOOK}field-governance: spec.capacity.path spec.warmReplicas of VirtualMachinePool."
        f"pools.agents.example.com {TENANT}/{pool} is already governed by ScheduledCapacity "
        f"{TENANT}/office-hours-{pool} (its spec.capacity.path is spec.warmReplicas too)")
    assert "combine them in one CompositeSchedule (anyOf, allOf, not) and point a single " \
           "ScheduledCapacity at it" in message
    with pytest.raises(ApiException) as missing:
        objects.get_namespaced_custom_object(*SCAP[:2], TENANT, SCAP[2], "override-" + pool)
    assert missing.value.status == 404


def test_a_prefix_related_path_and_another_version_of_the_target_are_the_same_field(
        objects: client.CustomObjectsApi) -> None:
    pool = f"pool-{uuid.uuid4().hex[:6]}"
    objects.create_namespaced_custom_object(*SCAP[:2], TENANT, SCAP[2],
                                            scap("outer-" + pool, pool, "spec.template"))
    _wait_cached(objects, pool, "spec.template")
    inner = _denied(_create(objects, scap("inner-" + pool, pool, "spec.template.replicas")))
    assert f"governed by ScheduledCapacity {TENANT}/outer-{pool} (its spec.capacity.path " \
           "spec.template overlaps spec.template.replicas)" in inner
    other_version = _denied(_create(objects, scap("v1-" + pool, pool, "spec.template",
                                                            version="v1")))
    assert f"governed by ScheduledCapacity {TENANT}/outer-{pool}" in other_version
    # A field beside it on the same object is another field.
    objects.create_namespaced_custom_object(*SCAP[:2], TENANT, SCAP[2],
                                            scap("beside-" + pool, pool, "spec.warmReplicas"))


def test_an_update_moving_onto_a_governed_field_is_denied_and_one_keeping_its_claim_passes(
        objects: client.CustomObjectsApi) -> None:
    pool, elsewhere = f"pool-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"
    objects.create_namespaced_custom_object(*SCAP[:2], TENANT, SCAP[2], scap("first-" + pool, pool))
    objects.create_namespaced_custom_object(*SCAP[:2], TENANT, SCAP[2], scap("mover-" + pool, elsewhere))
    _wait_cached(objects, pool)
    moved = {"spec": {"targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                                    "kind": "VirtualMachinePool", "name": pool}}}
    message = _denied(lambda: objects.patch_namespaced_custom_object(
        *SCAP[:2], TENANT, SCAP[2], "mover-" + pool, moved))
    assert f"already governed by ScheduledCapacity {TENANT}/first-{pool}" in message
    # Editing anything else, on either object, passes.
    objects.patch_namespaced_custom_object(*SCAP[:2], TENANT, SCAP[2], "mover-" + pool,
                                           {"spec": {"enabled": False}})
    objects.patch_namespaced_custom_object(*SCAP[:2], TENANT, SCAP[2], "first-" + pool,
                                           {"spec": {"capacity": {"activeValue": 5}}})


def test_a_scheduled_capacity_on_a_pool_an_hpa_scales_is_refused_in_the_words_of_check(
        objects: client.CustomObjectsApi, admin: client.ApiClient) -> None:
    """An autoscaler is a governor fivespot does not run (decision record 0029): the webhook
    lists the namespace's HPAs when a ScheduledCapacity is created, through the real API server
    and the webhook's own RBAC, and refuses with the message `fivespot check` gives offline."""
    from fivespot.api.fieldgovernance import autoscaled_message, claim_of, writer_of
    from fivespot.runtime import kube

    pool = f"pool-{uuid.uuid4().hex[:6]}"
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
           "metadata": {"name": f"{pool}-hpa", "namespace": TENANT},
           "spec": {"scaleTargetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                                       "kind": "VirtualMachinePool", "name": pool},
                    "minReplicas": 1, "maxReplicas": 4}}
    kube.request(admin, "POST", f"/apis/autoscaling/v2/namespaces/{TENANT}/horizontalpodautoscalers",
                 body=hpa)
    body = scap("office-hours-" + pool, pool)
    message = _denied(_create(objects, body))
    claim, writer = claim_of(body), writer_of(hpa)
    assert claim is not None and writer is not None
    assert message == HOOK + autoscaled_message(claim, writer)
    # another pool in the same namespace is not the HPA's
    objects.create_namespaced_custom_object(*SCAP[:2], TENANT, SCAP[2],
                                            scap("office-hours-other-" + pool, "other-" + pool))
