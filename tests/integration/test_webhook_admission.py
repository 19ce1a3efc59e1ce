"""The webhook against the real API server: the server calls it over TLS for every check, the
denials reach the client, the polyfill agrees with the native policies on the fixture corpus,
and certificates rotate under a stream of requests without losing one.

Setup (once per module): the agent-sandbox example with `enforcement: both`, compiled and
installed as GitOps would, with ONE deliberate rewrite: the compiled webhook configuration
points at the Service `fivespot-webhook` in `5spot-system`, which a local API server (no
kube-proxy, no pods) cannot route to, so each webhook's `clientConfig.service` is replaced by
`url: https://127.0.0.1:PORT/<the same path>`. Nothing else changes: no caBundle is written by
the test — the webhook process, running as its own ServiceAccount with its compiled RBAC, creates
the TLS Secret and injects the caBundle itself, exactly as in a cluster.

It runs with two gunicorn workers (they race for the Secret like two replicas) and with
certificates short-lived enough to rotate during the module: serving 24 s, CA 48 s, overlap 4 s.
An earlier module may have left the Secret holding year-long certificates (the API server is
shared by the session); the webhook renews them on these lifetimes all the same.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from cryptography import x509
from kubernetes import client
from kubernetes.client.rest import ApiException

from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo
from fivespot.controllers.capacity.controller import FIELD_MANAGER
from fivespot.controllers.capacity.observations import field_owner
from fivespot.controllers.capacity.patches import scale_apply
from fivespot.devcluster.clients import service_account_kubeconfig
from fivespot.devcluster.kubectl import install
from tests.integration.capacity_world import allow_deployments
from tests.integration.test_control_plane_is_real import eventually

ROOT: Final = Path(__file__).resolve().parents[2]
EXAMPLE: Final = ROOT / "examples" / "agent-sandbox"
INSTALL_NS: Final = "5spot-system"
TENANT: Final = "agents"
OUTSIDER: Final = "team-b"
CONFIGURATION: Final = "fivespot-webhook"
SECRET: Final = "fivespot-webhook-tls"
CAPACITY_SA: Final = "fivespot-capacity-controller"
SCAP: Final = ("5spot.finos.org", "v1alpha1", "scheduledcapacities")
SM: Final = ("5spot.finos.org", "v1beta1", "scheduledmachines")
VMP: Final = ("pools.agents.example.com", "v1alpha1", "virtualmachinepools")
LIFETIMES: Final = ["--cert-validity", "24s", "--ca-validity", "48s", "--ca-overlap", "4s",
                    "--certificate-check-interval", "0.5"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scap(name: str, namespace: str = TENANT, node: str | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                     "kind": "ManualSchedule", "name": "window"},
        "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                      "kind": "VirtualMachinePool", "name": "sandboxes"},
        "capacity": {"path": "spec.warmReplicas", "activeValue": 4}, **spec}
    if node:
        body["nodeName"] = node
    return {"apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
            "metadata": {"name": name, "namespace": namespace}, "spec": body}


def denial(call: Callable[[], object]) -> str | None:
    """The API server's message if `call` was refused, else None."""
    try:
        call()
    except ApiException as error:
        return str(json.loads(error.body).get("message", error.body))
    return None


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    metrics_port: int = 0
    """The plain-HTTP metrics port (0: none)."""

    def metrics(self) -> str:
        """The exposition text of `/metrics` on the metrics port."""
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=10) as response:
            return str(response.read().decode())

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)


def ready(port: int) -> bool | None:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as raw, \
                context.wrap_socket(raw) as tls:
            tls.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return True if tls.recv(64).startswith(b"HTTP/1.1 200") else None
    except OSError:
        return None


@dataclass
class Installed:
    server: Server
    out: Path
    admin: client.ApiClient
    objects: client.CustomObjectsApi
    fixtures: list[Any]


def _rewrite_to_local_url(out: Path, port: int) -> None:
    """The one change to the compiled output: Service -> URL (see the module docstring)."""
    path = out / "webhook" / f"{CONFIGURATION}.validatingwebhookconfiguration.yaml"
    configuration = yaml.safe_load(path.read_text())
    for hook in configuration["webhooks"]:
        service = hook["clientConfig"].pop("service")
        hook["clientConfig"]["url"] = f"https://127.0.0.1:{port}{service['path']}"
    path.write_text(yaml.safe_dump(configuration, sort_keys=False))


def _ensure_namespace(core: client.CoreV1Api, name: str) -> None:
    try:
        core.create_namespace({"metadata": {"name": name}})
    except ApiException as error:
        if error.status != 409:
            raise


def _namespaces(repo: Any) -> set[str]:
    """Every namespace the example's tenants and fixtures use (and ours), created up front."""
    found = {TENANT, OUTSIDER}
    found.update(n for tenant in repo.tenants for n in tenant.spec.namespaces)
    for fixture in repo.fixtures:
        for obj in (fixture.spec.object, fixture.spec.old_object or {}):
            namespace = (obj.get("metadata") or {}).get("namespace")
            if isinstance(namespace, str) and namespace:
                found.add(namespace)
    return found


@pytest.fixture(scope="module")
def installed(kubeconfig: Path, admin: client.ApiClient,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    work = tmp_path_factory.mktemp("webhook")
    config = work / "config"
    shutil.copytree(EXAMPLE / "config", config)
    allow_deployments(config, TENANT)
    platform = yaml.safe_load((config / "platform.yaml").read_text())
    platform["spec"]["enforcement"] = "both"
    (config / "platform.yaml").write_text(yaml.safe_dump(platform))
    compiled = compile_repo(config)
    out = work / "out"
    write_tree(compiled.files, out)
    port = free_port()
    _rewrite_to_local_url(out, port)
    core = client.CoreV1Api(admin)
    for name in _namespaces(compiled.repo):
        _ensure_namespace(core, name)
    install(kubeconfig, out, [EXAMPLE / "consumer" / "virtualmachinepools.yaml"])
    objects = client.CustomObjectsApi(admin)
    with serving(kubeconfig, admin, out, port, ["--workers", "2", "--request-deadline", "3",
                                                 *LIFETIMES]) as server:
        # Sentinel: the API server has the injected caBundle and reaches the webhook.
        eventually(lambda: True if denial(lambda: objects.create_namespaced_custom_object(
            *SCAP[:2], TENANT, SCAP[2], scap("sentinel"), dry_run="All")) is None else None,
            timeout_s=60)
        yield Installed(server, out, admin, objects, list(compiled.repo.fixtures))


def start_webhook(kubeconfig: Path, out: Path, port: int, log: Path, options: Sequence[str] = (),
                  ready_s: float = 60.0) -> Server:
    """`fivespot webhook serve` for the installed output `out`, as its own ServiceAccount, on
    127.0.0.1:`port`, logging to `log`; returns once it answers /readyz (its log is printed and
    it is stopped if it does not)."""
    identity = service_account_kubeconfig(kubeconfig, INSTALL_NS, "fivespot-webhook",
                                          out.parent / "webhook.kubeconfig")
    command = [sys.executable, "-m", "fivespot.webhook", "serve", "--port", str(port), "--bind", "127.0.0.1",
               "--metrics-port", "0", "--bundle", str(out / "bundle.json"), "--kubeconfig",
               str(identity), "--tls-san", "127.0.0.1", *options]
    with log.open("wb") as handle:
        process = subprocess.Popen(command, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    server = Server(process, port, log)
    try:
        eventually(lambda: ready(port), timeout_s=ready_s)
    except BaseException:
        print(server.output())
        server.stop()
        raise
    return server


@contextmanager
def serving(kubeconfig: Path, admin: client.ApiClient, out: Path, port: int,
            options: list[str]) -> Iterator[Server]:
    """The webhook of the installed output `out`, as its own ServiceAccount on `port`, until the
    block ends; then stopped and its configuration deleted. Its log is printed if the block fails."""
    server = start_webhook(kubeconfig, out, port, out.parent / "webhook.log", options)
    try:
        yield server
    except BaseException:
        print(server.output())
        raise
    finally:
        server.stop()
        registration = client.AdmissionregistrationV1Api(admin)
        try:
            registration.delete_validating_webhook_configuration(CONFIGURATION)
        except ApiException as error:
            if error.status != 404:
                raise


# --- host governance -----------------------------------------------------------------------------


def _machine(objects: client.CustomObjectsApi, name: str, node: str) -> None:
    body = {"apiVersion": "5spot.finos.org/v1beta1", "kind": "ScheduledMachine",
            "metadata": {"name": name, "namespace": TENANT},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": "window"}}}
    objects.create_namespaced_custom_object(*SM[:2], TENANT, SM[2], body)
    objects.patch_namespaced_custom_object_status(*SM[:2], TENANT, SM[2], name,
                                                  {"status": {"nodeRef": {"name": node}}})


def test_host_governance_denies_a_scheduled_capacity_on_a_governed_node_via_the_api_server(
        installed: Installed) -> None:
    objects, tag = installed.objects, uuid.uuid4().hex[:6]
    node = f"worker-{tag}"
    _machine(objects, f"sm-{tag}", node)

    def denied() -> str | None:  # the informer sees the machine a moment later
        return denial(lambda: objects.create_namespaced_custom_object(
            *SCAP[:2], TENANT, SCAP[2], scap(f"cap-{tag}", node=node), dry_run="All"))

    message = eventually(denied)
    assert message.startswith('admission webhook "host-governance.5spot.finos.org" denied the '
                              f"request: host-governance: spec.nodeName {node} is already governed "
                              f"by ScheduledMachine sm-{tag} in namespace {TENANT}")
    assert "name another node, or leave spec.nodeName unset" in message
    objects.create_namespaced_custom_object(*SCAP[:2], TENANT, SCAP[2], scap(
        f"cap-{tag}", node=f"free-{tag}", targetRef={  # its own pool: one field, one governor
            "apiVersion": "pools.agents.example.com/v1alpha1", "kind": "VirtualMachinePool",
            "name": f"pool-{tag}"}))


# --- the target guard ----------------------------------------------------------------------------


def test_the_capacity_identity_may_patch_only_the_allowlisted_field_of_a_governed_target(
        installed: Installed, kubeconfig: Path, tmp_path: Path) -> None:
    from fivespot.devcluster.clients import client_as_service_account

    objects, tag = installed.objects, uuid.uuid4().hex[:6]
    name = f"pool-{tag}"
    objects.create_namespaced_custom_object(*VMP[:2], TENANT, VMP[2], {
        "apiVersion": "pools.agents.example.com/v1alpha1", "kind": "VirtualMachinePool",
        "metadata": {"name": name, "namespace": TENANT, "labels": {"team": "a"}},
        "spec": {"warmReplicas": 0, "template": {"image": "sandbox:1"}}})
    capacity = client_as_service_account(kubeconfig, INSTALL_NS, CAPACITY_SA, create=False)
    as_capacity = client.CustomObjectsApi(capacity)
    try:
        as_capacity.patch_namespaced_custom_object(*VMP[:2], TENANT, VMP[2], name,
                                                   {"spec": {"warmReplicas": 7}})
        assert objects.get_namespaced_custom_object(*VMP[:2], TENANT, VMP[2], name)[
            "spec"]["warmReplicas"] == 7
        message = denial(lambda: as_capacity.patch_namespaced_custom_object(
            *VMP[:2], TENANT, VMP[2], name, {"metadata": {"labels": {"team": "b"}}}))
        assert message is not None and message.startswith(
            'admission webhook "target-guard.5spot.finos.org" denied the request: target-guard: '
            f"the capacity controller may change only spec.warmReplicas of VirtualMachinePool "
            f"{TENANT}/{name}, but this request also changes metadata.labels.team")
        over = denial(lambda: as_capacity.patch_namespaced_custom_object(
            *VMP[:2], TENANT, VMP[2], name, {"spec": {"warmReplicas": 33}}))
        assert over is not None and "must be an integer from 0 to 32" in over
        # Anyone else's writes never reach the guard (the compiled match condition).
        objects.patch_namespaced_custom_object(*VMP[:2], TENANT, VMP[2], name,
                                               {"metadata": {"labels": {"team": "b"}}})
        # The second lock: grant delete by hand, and the guard still refuses it.
        rbac = client.RbacAuthorizationV1Api(installed.admin)
        rbac.create_namespaced_role(TENANT, {
            "metadata": {"name": f"widened-{tag}"},
            "rules": [{"apiGroups": [VMP[0]], "resources": [VMP[2]], "verbs": ["delete"]}]})
        rbac.create_namespaced_role_binding(TENANT, {
            "metadata": {"name": f"widened-{tag}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": f"widened-{tag}"},
            "subjects": [{"kind": "ServiceAccount", "name": CAPACITY_SA, "namespace": INSTALL_NS}]})

        def refused_by_guard() -> str | None:
            text = denial(lambda: as_capacity.delete_namespaced_custom_object(
                *VMP[:2], TENANT, VMP[2], name, dry_run="All"))
            assert text is not None, "the delete went through"
            return text if "target-guard" in text else None  # RBAC's 403 until it propagates

        deleted = eventually(refused_by_guard)
        assert f"may not delete VirtualMachinePool {TENANT}/{name}; draining and deleting belong " \
               "to the consumer" in deleted
    finally:
        capacity.close()


def test_the_capacity_identity_scales_a_deployment_through_scale_only_and_within_the_ceiling(
        installed: Installed, kubeconfig: Path) -> None:
    """Decision 0050: RBAC gives the capacity identity `deployments/scale` and not the object,
    and the compiled ValidatingAdmissionPolicy holds the value to the consumer's ceiling; the
    webhook is not asked."""
    from fivespot.devcluster.clients import client_as_service_account

    name = f"web-{uuid.uuid4().hex[:6]}"
    apps = client.AppsV1Api(installed.admin)
    apps.create_namespaced_deployment(TENANT, {
        "metadata": {"name": name},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
    capacity = client_as_service_account(kubeconfig, INSTALL_NS, CAPACITY_SA, create=False)
    as_capacity = client.AppsV1Api(capacity)
    try:
        as_capacity.patch_namespaced_deployment_scale(name, TENANT, {"spec": {"replicas": 10}})
        assert apps.read_namespaced_deployment(name, TENANT).spec.replicas == 10
        as_capacity.patch_namespaced_deployment_scale(name, TENANT, {"spec": {"replicas": 0}})
        assert apps.read_namespaced_deployment(name, TENANT).spec.replicas == 0, \
            "a Scale of 0 leaves replicas out, and the policy reads that as 0"
        over = denial(lambda: as_capacity.patch_namespaced_deployment_scale(
            name, TENANT, {"spec": {"replicas": 11}}))
        assert over is not None and "ValidatingAdmissionPolicy 'fivespot-target-guard-scale-deployments'" \
            in over and (f"target-guard: spec.replicas of deployments {TENANT}/{name} must be an "
                         "integer from 0 to 10 (the consumer's maxActiveValue), not 11") in over
        on_object = denial(lambda: as_capacity.patch_namespaced_deployment(
            name, TENANT, {"spec": {"replicas": 3}}))
        assert on_object is not None and "forbidden" in on_object and "cannot patch resource " \
            '"deployments" in API group "apps"' in on_object, on_object
        elsewhere = denial(lambda: as_capacity.patch_namespaced_deployment_scale(
            name, OUTSIDER, {"spec": {"replicas": 1}}))
        assert elsewhere is not None and "forbidden" in elsewhere, "tenant namespaces only"
        # The controller's own write, an applied Scale, owns replicas at 0 too (a GitOps engine
        # leaves a field alone only when a manager it trusts owns it).
        for value in (4, 0):
            as_capacity.patch_namespaced_deployment_scale(
                name, TENANT, scale_apply(TENANT, name, value), field_manager=FIELD_MANAGER,
                force=True, _content_type="application/apply-patch+yaml")
            managed = apps.read_namespaced_deployment(name, TENANT).to_dict()["metadata"][
                "managed_fields"]
            ours = [e for e in managed if e["manager"] == FIELD_MANAGER]
            assert [(e["operation"], e["subresource"]) for e in ours] == [("Apply", "scale")], ours
            assert field_owner([{"manager": e["manager"], "fieldsV1": e["fields_v1"]}
                                for e in managed], "spec.replicas", FIELD_MANAGER) == FIELD_MANAGER
    finally:
        capacity.close()


# --- the polyfill --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    object: dict[str, Any]
    old: dict[str, Any] | None = None


def corpus(installed: Installed) -> list[Case]:
    cases = [Case(f"fixture:{f.metadata.name}", copy.deepcopy(f.spec.object),
                  copy.deepcopy(f.spec.old_object) if f.spec.operation == "UPDATE" else None)
             # The polyfill decides ScheduledCapacity; other kinds' fixtures are their CRDs' own
             # rules (test_checker_fidelity compares those).
             for f in installed.fixtures if f.spec.object.get("kind") == "ScheduledCapacity"]
    cases += [
        Case("outsider", scap("p", namespace=OUTSIDER)),
        Case("unknown-schedule-kind", scap("p", schedule={
            "apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "CronSchedule",
            "name": "w"})),
        Case("over-tenant-limit", scap("p", capacity={"path": "spec.warmReplicas",
                                                      "activeValue": 11})),
        Case("wrong-consumer", scap("p", targetRef={"apiVersion": "apps/v1", "kind": "Deployment",
                                                    "name": "d"})),
        Case("update-over-limit", scap("p", capacity={"path": "spec.warmReplicas",
                                                      "activeValue": 12}), scap("p")),
        Case("allowed", scap("p")),
    ]
    return cases


def verdict(objects: client.CustomObjectsApi, case: Case, suffix: str) -> str | None:
    """None when allowed, else the server's message."""
    obj = copy.deepcopy(case.object)
    namespace = (obj.get("metadata") or {}).get("namespace") or "default"
    if case.old is None:
        return denial(lambda: objects.create_namespaced_custom_object(
            *SCAP[:2], namespace, SCAP[2], obj, dry_run="All"))
    old = copy.deepcopy(case.old)
    name = f"parity-{suffix}"
    old["metadata"]["name"] = name
    created = objects.create_namespaced_custom_object(*SCAP[:2], namespace, SCAP[2], old)
    obj["metadata"].update(name=name, resourceVersion=created["metadata"]["resourceVersion"])
    try:
        return denial(lambda: objects.replace_namespaced_custom_object(
            *SCAP[:2], namespace, SCAP[2], name, obj, dry_run="All"))
    finally:
        objects.delete_namespaced_custom_object(*SCAP[:2], namespace, SCAP[2], name)


NATIVE_PREFIX: Final = "ValidatingAdmissionPolicy '"
POLYFILL_PREFIX: Final = ('admission webhook "vap-polyfill.5spot.finos.org" denied the request: '
                          "vap-polyfill: ValidatingAdmissionPolicy '")


def _native_policies_decide(objects: client.CustomObjectsApi, cases: list[Case]) -> None:
    """Each native policy denies its own bad object (every tenant's limits binding too): the
    install's policies and bindings reach the API server's admission plugin one by one, a moment
    after they are created, so the native verdicts are read only once all of them are in force."""
    tenants = {str((c.object.get("metadata") or {}).get("namespace") or "") for c in cases} - {
        "", OUTSIDER, "default"}
    sentinels = [(scap("p", namespace=OUTSIDER), "fivespot-scap-tenancy"),
                 (scap("p", schedule={"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                      "kind": "CronSchedule", "name": "w"}),
                  "fivespot-scap-schedule-kinds")]
    sentinels += [(scap("p", namespace=namespace, capacity={"path": "spec.warmReplicas",
                                                                 "activeValue": 11}),
                   "fivespot-tenant-limits") for namespace in sorted(tenants | {TENANT})]
    for obj, policy in sentinels:
        def denied_by(obj: dict[str, Any] = obj, policy: str = policy) -> bool | None:
            message = verdict(objects, Case("sentinel", obj), "s")
            return True if message and f"{NATIVE_PREFIX}{policy}'" in message \
                and POLYFILL_PREFIX not in message else None
        eventually(denied_by, timeout_s=60)


def test_the_polyfill_gives_the_native_policies_verdicts_on_the_fixture_corpus(
        installed: Installed) -> None:
    objects = installed.objects
    cases = corpus(installed)
    _native_policies_decide(objects, cases)
    native = {c.name: verdict(objects, c, f"c{i}") for i, c in enumerate(cases)}
    bindings = [json.loads(json.dumps(o)) for o in yaml.safe_load_all(
        "\n---\n".join(p.read_text() for p in sorted(
            (installed.out / "admission" / "vap").glob("*.binding.yaml"))))]
    registration = client.AdmissionregistrationV1Api(installed.admin)
    for binding in bindings:
        registration.delete_validating_admission_policy_binding(binding["metadata"]["name"])
    try:
        def polyfill_decides() -> bool | None:
            message = verdict(objects, Case("sentinel", scap("p", namespace=OUTSIDER)), "s")
            return True if message and message.startswith(POLYFILL_PREFIX) else None

        def no_native_binding_left() -> dict[str, str | None] | None:
            # Each binding's removal reaches the API server's admission plugin on its own:
            # the corpus is polyfilled only once no denial still comes from a native policy.
            verdicts = {c.name: verdict(objects, c, f"c{i}") for i, c in enumerate(cases)}
            native_left = [m for m in verdicts.values()
                           if m is not None and NATIVE_PREFIX in m and POLYFILL_PREFIX not in m]
            return None if native_left else verdicts

        eventually(polyfill_decides, timeout_s=60)
        polyfilled = eventually(no_native_binding_left, timeout_s=60)
    finally:
        for binding in bindings:
            binding["metadata"].pop("resourceVersion", None)
            registration.create_validating_admission_policy_binding(binding)
    by_policy = 0
    for case in cases:
        theirs, ours = native[case.name], polyfilled[case.name]
        assert (theirs is None) == (ours is None), (case.name, theirs, ours)
        if theirs is not None and NATIVE_PREFIX in theirs:
            by_policy += 1
            assert ours is not None and ours.startswith(POLYFILL_PREFIX), (case.name, ours)
            decision = theirs[theirs.index(NATIVE_PREFIX):]  # after '<resource> "<name>" is forbidden: '
            assert decision in ours, (case.name, theirs, ours)
        elif theirs is not None:  # the CRD's own schema or rules: decided before any webhook
            assert ours == theirs, case.name
    assert by_policy >= 10, f"only {by_policy} cases exercised a policy"


# --- certificates --------------------------------------------------------------------------------


def _secret(core: client.CoreV1Api) -> tuple[str, tuple[str, ...]]:
    data = core.read_namespaced_secret(SECRET, INSTALL_NS).data
    serving = x509.load_pem_x509_certificate(base64.b64decode(data["tls.crt"]))
    authorities = x509.load_pem_x509_certificates(base64.b64decode(data["ca.crt"]))
    return str(serving.serial_number), tuple(a.subject.rfc4514_string() for a in authorities)


def test_certificates_rotate_during_a_stream_of_requests_and_none_is_lost(installed: Installed) -> None:
    objects, tag = installed.objects, uuid.uuid4().hex[:6]
    core = client.CoreV1Api(installed.admin)
    node = f"rotating-{tag}"
    _machine(objects, f"sm-{tag}", node)
    eventually(lambda: denial(lambda: objects.create_namespaced_custom_object(
        *SCAP[:2], TENANT, SCAP[2], scap("probe", node=node), dry_run="All")))
    servings: set[str] = set()
    authorities: set[str] = set()
    failures: list[str] = []
    sent = 0
    deadline = time.monotonic() + 40  # > one CA renewal period (32 s) plus its overlap
    while time.monotonic() < deadline:
        sent += 1
        allowed = denial(lambda: objects.create_namespaced_custom_object(
            *SCAP[:2], TENANT, SCAP[2], scap(f"ok-{sent}"), dry_run="All"))
        if allowed is not None:
            failures.append(f"{sent} allowed case: {allowed}")
        refused = denial(lambda: objects.create_namespaced_custom_object(
            *SCAP[:2], TENANT, SCAP[2], scap(f"no-{sent}", node=node), dry_run="All"))
        if refused is None or "host-governance: spec.nodeName" not in refused:
            failures.append(f"{sent} conflicted case: {refused}")
        serial, cas = _secret(core)
        servings.add(serial)
        authorities.update(cas)
        time.sleep(0.05)
    assert not failures, failures[:5]
    assert sent >= 30, "a stream: a request pair every ~1.3 s at the least, on a loaded machine"
    assert len(servings) >= 3, "the serving certificate did not rotate during the stream"
    assert len(authorities) >= 2, "the CA did not rotate during the stream"


def _keeper(api: client.ApiClient, namespace: str) -> Any:
    from datetime import timedelta

    from fivespot.webhook.certificates import Lifetimes, SecretKeeper, ServingNames

    return SecretKeeper(api, namespace, SECRET, f"absent-{namespace}",
                        Lifetimes(ca=timedelta(days=3), serving=timedelta(days=1)),
                        ServingNames.for_service("fivespot-webhook", namespace))


def _compiled_secret(out: Path, namespace: str) -> dict[str, Any]:
    secret = yaml.safe_load((out / "workloads" / f"{SECRET}.secret.yaml").read_text())
    secret["metadata"]["namespace"] = namespace
    return dict(secret)


def test_replicas_starting_at_once_fill_the_compiled_secret_once_the_first_writer_won(
        kubeconfig: Path, admin: client.ApiClient, namespace: str, installed: Installed) -> None:
    from fivespot.devcluster.clients import admin_client

    client.CoreV1Api(admin).create_namespaced_secret(namespace,
                                                     _compiled_secret(installed.out, namespace))
    barrier = threading.Barrier(4)
    states: list[Any] = []
    errors: list[BaseException] = []

    def replica() -> None:
        api = admin_client(kubeconfig)
        try:
            keeper = _keeper(api, namespace)
            barrier.wait()
            states.append((keeper.reconcile(), keeper.rotations))
        except BaseException as error:  # reported below
            errors.append(error)
        finally:
            api.close()

    threads = [threading.Thread(target=replica) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert len({s.serving_cert_pem for s, _ in states}) == 1
    assert len({s.ca_bundle for s, _ in states}) == 1
    assert sum(rotations for _, rotations in states) == 1, "exactly one replica wrote"
    secret = client.CoreV1Api(admin).read_namespaced_secret(SECRET, namespace)
    assert base64.b64decode(secret.data["tls.crt"]) == states[0][0].serving_cert_pem
    assert secret.type == "kubernetes.io/tls"


def test_without_its_compiled_secret_the_webhook_says_to_apply_it_and_creates_nothing(
        kubeconfig: Path, admin: client.ApiClient, namespace: str) -> None:
    from fivespot.devcluster.clients import admin_client
    from fivespot.webhook.certificates import CertificateError

    api = admin_client(kubeconfig)
    try:
        with pytest.raises(CertificateError) as raised:
            _keeper(api, namespace).reconcile()
    finally:
        api.close()
    assert str(raised.value) == (
        f"Secret {namespace}/{SECRET} does not exist; it is part of the compiled output "
        f"(workloads/{SECRET}.secret.yaml, empty: the webhook fills it, and may not create it): "
        "sync or apply the output's workloads/ layer")
    assert client.CoreV1Api(admin).list_namespaced_secret(namespace).items == []
