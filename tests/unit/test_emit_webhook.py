"""The webhook emitter wires narrow webhooks, following Kubernetes' good practices, and the
webhook's TLS Secret, RBAC and Deployment arguments."""

from __future__ import annotations

from typing import Any

import pytest

from fivespot.compiler.emit import admission, rbac, webhook, workloads
from fivespot.compiler.emit.base import ADMISSION, WEBHOOK_CONFIG, WORKLOADS
from fivespot.compiler.repo import Repo
from fivespot.compiler.spec import CapacityConsumer, Platform
from fivespot.policies.cel.engine import compile_expression

API = "config.5spot.finos.org/v1alpha1"
NS = "fivespot-test"
CAPACITY_USER = f"system:serviceaccount:{NS}:fivespot-capacity-controller"
CERT_MANAGER = {"certificate": {"mode": "cert-manager",
                                "issuerRef": {"kind": "ClusterIssuer", "name": "internal-ca"}}}


def platform(**spec: Any) -> Platform:
    return Platform.model_validate({"apiVersion": API, "kind": "Platform",
                                    "metadata": {"name": "platform"},
                                    "spec": {"namespace": NS, "image": "example/fivespot:1", **spec}})


def consumer(name: str, group: str, resource: str) -> CapacityConsumer:
    return CapacityConsumer.model_validate({
        "apiVersion": API, "kind": "CapacityConsumer", "metadata": {"name": name},
        "spec": {"group": group, "version": "v1", "kind": "Pool", "resource": resource,
                 "capacityPaths": ["spec.replicas"], "maxActiveValue": 10}})


CONSUMERS = (consumer("pools", "pools.example.com", "pools"),
             consumer("warm", "agents.example.com", "warmpools"),
             consumer("sandboxes", "agents.example.com", "sandboxes"))


def make_repo(consumers: tuple[CapacityConsumer, ...] = CONSUMERS, **spec: Any) -> Repo:
    return Repo(platform=platform(**spec), consumers=consumers, builtin_providers=(),
                custom_providers=(), tenants=(), fixtures=())


def configuration(repo: Repo) -> dict[str, Any]:
    [found] = [a.obj for a in webhook.emit(repo) if a.kind == "ValidatingWebhookConfiguration"]
    return found


def hooks(repo: Repo) -> dict[str, dict[str, Any]]:
    return {h["name"]: h for h in configuration(repo)["webhooks"]}


def test_a_repo_without_consumers_has_no_webhook() -> None:
    assert webhook.emit(make_repo(consumers=())) == []


def test_the_configuration_has_its_own_layer_after_the_workloads_and_the_rest_land_before() -> None:
    paths = {a.path: a.layer for a in webhook.emit(make_repo(webhook=CERT_MANAGER))}
    assert paths == {
        "webhook/fivespot-webhook.validatingwebhookconfiguration.yaml": WEBHOOK_CONFIG,
        "admission/webhook/fivespot-webhook.certificate.yaml": ADMISSION,
        "workloads/fivespot-webhook.service.yaml": WORKLOADS,
        "workloads/fivespot-webhook.networkpolicy.yaml": WORKLOADS,
    }
    assert "workloads/fivespot-webhook-tls.secret.yaml" in {
        a.path for a in webhook.emit(make_repo())}


@pytest.mark.parametrize("enforcement,expected", [
    ("vap", ["host-governance.5spot.finos.org", "field-governance.5spot.finos.org",
             "target-guard.5spot.finos.org"]),
    ("webhook", ["host-governance.5spot.finos.org", "field-governance.5spot.finos.org",
                 "target-guard.5spot.finos.org", "vap-polyfill.5spot.finos.org"]),
    ("both", ["host-governance.5spot.finos.org", "field-governance.5spot.finos.org",
              "target-guard.5spot.finos.org", "vap-polyfill.5spot.finos.org"]),
])
def test_the_polyfill_webhook_exists_only_when_enforcement_includes_the_webhook(
        enforcement: str, expected: list[str]) -> None:
    found = configuration(make_repo(enforcement=enforcement))["webhooks"]
    assert [h["name"] for h in found] == expected


def test_every_webhook_follows_the_good_practices() -> None:
    for name, hook in hooks(make_repo(enforcement="both")).items():
        assert hook["admissionReviewVersions"] == ["v1"], name
        assert hook["sideEffects"] == "None"
        assert hook["matchPolicy"] == "Equivalent"
        if "target-guard" not in name:  # see the next test
            assert hook["namespaceSelector"] == {"matchExpressions": [{
                "key": "kubernetes.io/metadata.name", "operator": "NotIn",
                "values": sorted([NS, "kube-system"])}]}
        service = hook["clientConfig"]["service"]
        assert service["namespace"] == NS and service["name"] == "fivespot-webhook"
        assert service["port"] == 443
        assert "caBundle" not in hook["clientConfig"]


def test_each_webhook_has_its_own_path_and_rules() -> None:
    found = hooks(make_repo(enforcement="both"))
    scap_rule = [{"apiGroups": ["5spot.finos.org"], "apiVersions": ["*"],
                  "operations": ["CREATE", "UPDATE"], "resources": ["scheduledcapacities"],
                  "scope": "Namespaced"}]
    assert found["host-governance.5spot.finos.org"]["rules"] == scap_rule
    assert found["field-governance.5spot.finos.org"]["rules"] == scap_rule
    assert found["vap-polyfill.5spot.finos.org"]["rules"] == scap_rule
    assert {n: h["clientConfig"]["service"]["path"] for n, h in found.items()} == {
        "host-governance.5spot.finos.org": "/validate/host-governance",
        "field-governance.5spot.finos.org": "/validate/field-governance",
        "target-guard.5spot.finos.org": "/validate/target-guard",
        "vap-polyfill.5spot.finos.org": "/validate/vap-polyfill",
    }
    assert all([c["name"] for c in h["matchConditions"]] == ["not-an-emergency-stop"]
               for n, h in found.items() if "target-guard" not in n)


def test_the_target_guard_sees_the_capacity_identity_in_every_namespace_install_namespace_too() -> None:
    """Its match condition, not a namespace hole, keeps it out of everyone else's recovery."""
    guard = hooks(make_repo())["target-guard.5spot.finos.org"]
    assert guard["namespaceSelector"] == {}
    assert [c["name"] for c in guard["matchConditions"]] == ["only-the-capacity-controller"]


def test_on_clusters_too_old_for_match_conditions_the_guard_keeps_out_of_the_own_namespaces() -> None:
    """A 1.27 API server drops matchConditions: every identity's writes would reach the guard."""
    old = hooks(make_repo(enforcement="webhook", minKubernetesVersion="1.27"))
    assert old["target-guard.5spot.finos.org"]["namespaceSelector"] == {"matchExpressions": [{
        "key": "kubernetes.io/metadata.name", "operator": "NotIn",
        "values": sorted([NS, "kube-system"])}]}
    current = hooks(make_repo(enforcement="webhook", minKubernetesVersion="1.28"))
    assert current["target-guard.5spot.finos.org"]["namespaceSelector"] == {}


def test_the_target_guard_covers_every_operation_and_subresource_of_every_consumer_resource() -> None:
    guard = hooks(make_repo())["target-guard.5spot.finos.org"]
    assert guard["rules"] == [
        {"apiGroups": ["agents.example.com"], "apiVersions": ["*"], "operations": ["*"],
         "resources": ["sandboxes", "sandboxes/*", "warmpools", "warmpools/*"]},
        {"apiGroups": ["pools.example.com"], "apiVersions": ["*"], "operations": ["*"],
         "resources": ["pools", "pools/*"]},
    ]


def deployments(paths: tuple[str, ...] = ("spec.replicas",)) -> CapacityConsumer:
    return CapacityConsumer.model_validate({
        "apiVersion": API, "kind": "CapacityConsumer", "metadata": {"name": "deployments"},
        "spec": {"group": "apps", "version": "v1", "kind": "Deployment", "resource": "deployments",
                 "capacityPaths": list(paths), "maxActiveValue": 10}})


def test_scale_writes_are_left_to_the_api_server_where_it_serves_the_guards_policy() -> None:
    """Decision 0050: the capacity identity writes a Deployment's replicas through `/scale`, which
    a ValidatingAdmissionPolicy judges; the webhook still sees every other write of that kind."""
    guard = hooks(make_repo((deployments(),)))["target-guard.5spot.finos.org"]
    assert guard["rules"] == [{"apiGroups": ["apps"], "apiVersions": ["*"], "operations": ["*"],
                               "resources": ["deployments", "deployments/status"]}]
    old = hooks(make_repo((deployments(),), enforcement="webhook", minKubernetesVersion="1.29"))
    assert old["target-guard.5spot.finos.org"]["rules"][0]["resources"] == \
        ["deployments", "deployments/*"], "no VAPs served: the webhook judges scale writes too"
    two = hooks(make_repo((deployments(("spec.replicas", "spec.minReadySeconds")),)))
    assert two["target-guard.5spot.finos.org"]["rules"][0]["resources"] == \
        ["deployments", "deployments/*"], "two fields: written on the object itself"


def test_the_target_guards_match_condition_names_the_capacity_identity() -> None:
    guard = hooks(make_repo())["target-guard.5spot.finos.org"]
    [condition] = guard["matchConditions"]
    assert condition == {"name": "only-the-capacity-controller",
                         "expression": f"request.userInfo.username == '{CAPACITY_USER}'"}
    program = compile_expression(condition["expression"], ["request"])
    assert program.evaluate({"request": {"userInfo": {"username": CAPACITY_USER}}}) is True
    for other in ("system:admin", f"system:serviceaccount:{NS}:fivespot-webhook",
                  "system:serviceaccount:other:fivespot-capacity-controller"):
        assert program.evaluate({"request": {"userInfo": {"username": other}}}) is False


@pytest.mark.parametrize("policy,timeout", [("Fail", 5), ("Ignore", 3), ("Fail", 30)])
def test_failure_policy_and_timeout_follow_the_platform_except_the_target_guards_policy(
        policy: str, timeout: int) -> None:
    repo = make_repo(enforcement="both", webhook={"failurePolicy": policy, "timeoutSeconds": timeout})
    for name, hook in hooks(repo).items():
        expected = "Fail" if name == "target-guard.5spot.finos.org" else policy
        assert (hook["failurePolicy"], hook["timeoutSeconds"]) == (expected, timeout), name


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
@pytest.mark.parametrize("minimum", ["1.27", "1.34"])
def test_the_target_guard_fails_closed_whatever_the_platform_says(policy: str, minimum: str) -> None:
    """It only ever sees the capacity identity's writes, so Fail can block nobody else; Ignore
    would leave those writes with RBAC as their only lock during any outage (review F6)."""
    repo = make_repo(enforcement="webhook", minKubernetesVersion=minimum,
                     webhook={"failurePolicy": policy})
    assert hooks(repo)["target-guard.5spot.finos.org"]["failurePolicy"] == "Fail"


def test_self_managed_mode_leaves_the_ca_bundle_to_the_webhook_and_emits_no_certificate() -> None:
    repo = make_repo()
    assert not [a for a in webhook.emit(repo) if a.kind == "Certificate"]
    assert "annotations" not in configuration(repo)["metadata"]


def test_self_managed_mode_emits_the_tls_secret_empty_and_created_once_for_the_webhook_to_fill(
) -> None:
    """The webhook may not create Secrets (review F7): the output has it, with no certificate in
    it, marked so that Flux and `fivespot install` create it and never apply it again."""
    [secret] = [a for a in webhook.emit(make_repo()) if a.kind == "Secret"]
    assert secret.path == f"{WORKLOADS}/fivespot-webhook-tls.secret.yaml"
    assert secret.obj["metadata"]["name"] == "fivespot-webhook-tls"
    assert secret.obj["metadata"]["namespace"] == NS
    assert secret.obj["metadata"]["annotations"] == {"kustomize.toolkit.fluxcd.io/ssa": "IfNotPresent"}
    assert secret.obj["type"] == "kubernetes.io/tls"
    assert secret.obj["data"] == {"tls.crt": "", "tls.key": ""}
    assert not [a for a in webhook.emit(make_repo(webhook=CERT_MANAGER)) if a.kind == "Secret"]


def test_the_webhook_may_fill_its_secret_and_patch_its_configuration_but_create_no_secret() -> None:
    repo = make_repo()
    rules = [(rule["resources"], rule["verbs"], rule.get("resourceNames"))
             for a in rbac.emit(repo) if a.name.startswith("fivespot-webhook") and "rules" in a.obj
             for rule in a.obj["rules"]]
    assert (["secrets"], ["get", "update"], ["fivespot-webhook-tls"]) in rules
    assert (["validatingwebhookconfigurations"], ["get", "patch"], ["fivespot-webhook"]) in rules
    assert not [r for r in rules if "secrets" in r[0] and r[2] is None]
    assert not [r for r in rules if "create" in r[1] or "update" in r[1] and
                "validatingwebhookconfigurations" in r[0]]


def webhook_container(repo: Repo) -> tuple[dict[str, Any], dict[str, Any]]:
    [deployment] = [a.obj for a in workloads.emit(repo)
                    if a.kind == "Deployment" and a.name == "fivespot-webhook"]
    pod = deployment["spec"]["template"]["spec"]
    return pod, pod["containers"][0]


def test_by_default_the_webhook_needs_tls_1_3_and_verifies_no_client() -> None:
    pod, container = webhook_container(make_repo())
    assert not {"--min-tls-version", "--client-ca-path", "--client-subject-names"} & set(
        container["args"])
    assert [v["name"] for v in pod["volumes"]] == ["bundle", "tmp"]


def test_tls_1_2_is_allowed_only_when_the_platform_asks() -> None:
    _, container = webhook_container(make_repo(webhook={"minTLSVersion": "1.2"}))
    assert container["args"][-2:] == ["--min-tls-version", "1.2"]


@pytest.mark.parametrize("source,volume", [
    ({"caConfigMap": {"name": "apiserver-client-ca"}},
     {"name": "client-ca", "configMap": {"name": "apiserver-client-ca", "defaultMode": 0o444,
                                         "items": [{"key": "ca.crt", "path": "ca.crt"}]}}),
    ({"caSecret": {"name": "apiserver-client-ca", "key": "root.pem"}},
     {"name": "client-ca", "secret": {"secretName": "apiserver-client-ca", "defaultMode": 0o440,
                                      "items": [{"key": "root.pem", "path": "ca.crt"}]}}),
])
def test_client_authentication_mounts_the_ca_and_names_the_allowed_callers(
        source: dict[str, Any], volume: dict[str, Any]) -> None:
    repo = make_repo(webhook={"clientAuthentication": {
        **source, "allowedNames": ["kube-apiserver-webhook-client", "apiserver.example.com"]}})
    pod, container = webhook_container(repo)
    assert container["args"][-4:] == [
        "--client-ca-path", "/var/run/fivespot/client-ca/ca.crt",
        "--client-subject-names", "kube-apiserver-webhook-client,apiserver.example.com"]
    assert volume in pod["volumes"]
    assert {"name": "client-ca", "mountPath": "/var/run/fivespot/client-ca",
            "readOnly": True} in container["volumeMounts"]
    others = [a.obj for a in workloads.emit(repo) if a.kind == "Deployment"
              and a.name != "fivespot-webhook"]
    assert others and not [d for d in others if "--client-ca-path" in
                           d["spec"]["template"]["spec"]["containers"][0]["args"]]


@pytest.mark.parametrize("settings,error", [
    ({"allowedNames": ["a"]}, "name the client CA once"),
    ({"caConfigMap": {"name": "a"}, "caSecret": {"name": "b"}, "allowedNames": ["a"]},
     "name the client CA once"),
    ({"caConfigMap": {"name": "a"}, "allowedNames": []}, "at least 1 item"),
    ({"caConfigMap": {"name": "a"}, "allowedNames": ["two,names"]}, "should match pattern"),
])
def test_client_authentication_needs_one_ca_and_at_least_one_name(
        settings: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        platform(webhook={"clientAuthentication": settings})


def test_cert_manager_mode_yields_a_certificate_the_injection_annotation_and_no_secret_rights(
) -> None:
    repo = make_repo(webhook=CERT_MANAGER)
    [certificate] = [a.obj for a in webhook.emit(repo) if a.kind == "Certificate"]
    assert certificate["apiVersion"] == "cert-manager.io/v1"
    assert certificate["metadata"]["name"] == "fivespot-webhook"
    assert certificate["metadata"]["namespace"] == NS
    assert certificate["spec"]["secretName"] == "fivespot-webhook-tls"
    assert certificate["spec"]["dnsNames"] == [f"fivespot-webhook.{NS}.svc",
                                               f"fivespot-webhook.{NS}.svc.cluster.local"]
    assert certificate["spec"]["issuerRef"] == {"group": "cert-manager.io",
                                                "kind": "ClusterIssuer", "name": "internal-ca"}
    assert configuration(repo)["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": f"{NS}/fivespot-webhook"}
    assert all("caBundle" not in h["clientConfig"] for h in configuration(repo)["webhooks"])
    resources = {r for a in rbac.emit(repo) for rule in a.obj.get("rules", [])
                 for r in rule["resources"]}
    assert "secrets" not in resources and "validatingwebhookconfigurations" not in resources


def test_the_service_sends_port_443_to_the_webhook_containers_serving_port() -> None:
    repo = make_repo()
    [service] = [a.obj for a in webhook.emit(repo) if a.kind == "Service"]
    [port] = service["spec"]["ports"]
    assert (port["port"], port["targetPort"]) == (443, 8443)
    [deployment] = [a.obj for a in workloads.emit(repo)
                    if a.kind == "Deployment" and a.name == "fivespot-webhook"]
    template = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    container_ports = {p["containerPort"] for p in template["spec"]["containers"][0]["ports"]}
    assert port["targetPort"] in container_ports
    assert service["metadata"]["name"] == hooks(repo)["target-guard.5spot.finos.org"][
        "clientConfig"]["service"]["name"]


def test_output_is_deterministic_whatever_order_consumers_are_listed_in() -> None:
    forward = make_repo(webhook=CERT_MANAGER, enforcement="both")
    backward = make_repo(consumers=tuple(reversed(CONSUMERS)), webhook=CERT_MANAGER,
                         enforcement="both")
    assert webhook.emit(forward) == webhook.emit(forward)
    assert webhook.emit(forward) == webhook.emit(backward)


# --- who may connect -----------------------------------------------------------------------------


def network_policy(repo: Repo) -> dict[str, Any] | None:
    found = [a for a in webhook.emit(repo) if a.kind == "NetworkPolicy"]
    assert all(a.path == f"{WORKLOADS}/fivespot-webhook.networkpolicy.yaml" for a in found)
    return found[0].obj if found else None


def test_by_default_the_serving_port_admits_nobody_and_metrics_admit_every_pod() -> None:
    policy = network_policy(make_repo())
    assert policy is not None
    assert policy["metadata"]["namespace"] == NS
    assert policy["spec"]["podSelector"] == {"matchLabels": workloads.selector("fivespot-webhook")}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"] == [
        {"from": [{"namespaceSelector": {}}], "ports": [{"port": 8080, "protocol": "TCP"}]}]


def test_the_allowed_sources_are_the_only_peers_of_the_serving_port() -> None:
    sources = [{"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.0.8.0/24"]}},
               {"namespaceSelector": {"matchLabels": {"team": "platform"}},
                "podSelector": {"matchExpressions": [{"key": "app", "operator": "In",
                                                      "values": ["prometheus"]}]}}]
    policy = network_policy(make_repo(webhook={"networkPolicy": {
        "allowedSources": sources[:1], "metricsSources": sources[1:]}}))
    assert policy is not None
    assert policy["spec"]["ingress"] == [
        {"from": sources[:1], "ports": [{"port": 8443, "protocol": "TCP"}]},
        {"from": sources[1:], "ports": [{"port": 8080, "protocol": "TCP"}]}]


def test_no_metrics_sources_means_no_metrics_rule_rather_than_an_open_one() -> None:
    policy = network_policy(make_repo(webhook={"networkPolicy": {"metricsSources": []}}))
    assert policy is not None and policy["spec"]["ingress"] == []


def test_the_network_policy_can_be_left_to_the_platform_team() -> None:
    assert network_policy(make_repo(webhook={"networkPolicy": {"enabled": False}})) is None


def test_the_guards_scale_policy_holds_the_capacity_identitys_scale_writes_to_the_ceiling() -> None:
    repo = make_repo((deployments(), *CONSUMERS))
    artifacts = {(a.obj["kind"], a.name): a.obj for a in admission.emit(repo)}
    policy = artifacts[("ValidatingAdmissionPolicy", "fivespot-target-guard-scale-deployments")]
    binding = artifacts[("ValidatingAdmissionPolicyBinding", "fivespot-target-guard-scale-deployments")]
    assert binding["spec"] == {"policyName": "fivespot-target-guard-scale-deployments",
                               "validationActions": ["Deny"]}
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [{
        "apiGroups": ["apps"], "apiVersions": ["*"], "operations": ["UPDATE"],
        "resources": ["deployments/scale"]}]
    assert [c["name"] for c in spec["matchConditions"]] == ["only-the-capacity-controller"]
    assert spec["variables"] == [{"name": "maxActiveValue", "expression": "10"}]
    assert [n for _, n in artifacts if "target-guard-scale" in n] == \
        ["fivespot-target-guard-scale-deployments"] * 2, "no scale for custom kinds"
    [check] = spec["validations"]
    variables = {"maxActiveValue": compile_expression("10", ["object"]).evaluate({"object": {}})}
    rule = compile_expression(check["expression"], ["object", "request", "variables"])
    message = compile_expression(check["messageExpression"], ["object", "request", "variables"])
    request = {"resource": {"resource": "deployments"}, "namespace": "team-a", "name": "web"}
    for replicas, allowed in ((0, True), (10, True), (11, False)):
        activation = {"object": {"spec": {"replicas": replicas}}, "request": request,
                      "variables": variables}
        assert rule.evaluate(activation) is allowed
    assert rule.evaluate({"object": {"spec": {}}, "request": request, "variables": variables}) \
        is True, "a Scale leaves out replicas 0"
    assert message.evaluate({"object": {"spec": {"replicas": 11}}, "request": request,
                             "variables": variables}) == (
        "target-guard: spec.replicas of deployments team-a/web must be an integer from 0 to 10 "
        "(the consumer's maxActiveValue), not 11; fix spec.capacity.activeValue of the "
        "ScheduledCapacity that targets it")


def test_the_guards_scale_policy_is_only_where_the_api_server_serves_it() -> None:
    old = make_repo((deployments(),), enforcement="webhook", minKubernetesVersion="1.29")
    assert not [a for a in admission.emit(old) if "target-guard-scale" in a.name]
