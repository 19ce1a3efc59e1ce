"""ValidatingAdmissionPolicies, their bindings, and the params objects of tenant policies.

Three policies, each defined once in `fivespot.policies.admission`: tenancy (only namespaces with a
TenantPolicy), installed schedule kinds, and per-tenant limits bound once per TenantPolicy with
a TenantCapacityLimit params object. Emitted only when enforcement includes `vap`; with
`webhook` the webhook evaluates the very same objects from the bundle.

Two more ask the API server's authorizer whether the author of a ScheduledCapacity may patch its
target, and the author of a ScheduledMachine may create what it embeds (decision 0024). Only the
API server knows the requesting user's RBAC, so they are ValidatingAdmissionPolicies whatever
the enforcement, on every cluster that serves them (minKubernetesVersion 1.30 or newer); they
are not in the bundle, since nothing the webhook or the controllers evaluate knows a user's RBAC.
"""

from __future__ import annotations

from typing import Any, Final

from fivespot.api.fieldgovernance import through_scale
from fivespot.api.identities import CAPACITY_CONTROLLER, service_account_user
from fivespot.api.kinds import machine_lifecycle as lifecycle
from fivespot.api.kinds import scheduled_capacity as scap
from fivespot.api.kinds import tenant_limit
from fivespot.compiler.emit.base import ADMISSION, Artifact, metadata
from fivespot.compiler.repo import Repo
from fivespot.compiler.spec import CapacityConsumer, TenantPolicy
from fivespot.policies import admission as rules

COMPONENT: Final = "fivespot-admission"
VAP_API: Final = "admissionregistration.k8s.io/v1"


def _validation(v: rules.Validation) -> dict[str, Any]:
    return {"expression": v.expression, "messageExpression": v.message_expression,
            "reason": v.reason}


def _match(group: str, version: str, plural: str) -> dict[str, Any]:
    return {"resourceRules": [{
        "apiGroups": [group], "apiVersions": [version],
        "operations": ["CREATE", "UPDATE"], "resources": [plural],
    }]}


_MATCH_SCAP: Final = (scap.GROUP, scap.VERSION, scap.PLURAL)
_MATCH_MACHINES: Final = (lifecycle.GROUP, lifecycle.VERSION, lifecycle.PLURAL)


def _policy(name: str, validations: list[rules.Validation] | tuple[rules.Validation, ...],
            variables: list[rules.Variable] | tuple[rules.Variable, ...],
            param_kind: dict[str, str] | None = None, failure_policy: str = "Fail",
            match: tuple[str, str, str] = _MATCH_SCAP) -> dict[str, Any]:
    spec: dict[str, Any] = {"failurePolicy": failure_policy, "matchConstraints": _match(*match)}
    if param_kind:
        spec["paramKind"] = param_kind
    if variables:
        spec["variables"] = [{"name": v.name, "expression": v.expression} for v in variables]
    spec["validations"] = [_validation(v) for v in validations]
    return {"apiVersion": VAP_API, "kind": "ValidatingAdmissionPolicy",
            "metadata": metadata(name, COMPONENT), "spec": spec}


def _binding(name: str, policy: str, actions: list[str], spec_extra: dict[str, Any] | None = None
             ) -> dict[str, Any]:
    spec: dict[str, Any] = {"policyName": policy, "validationActions": actions}
    spec.update(spec_extra or {})
    return {"apiVersion": VAP_API, "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": metadata(name, COMPONENT), "spec": spec}


def _cel_list(items: list[str]) -> str:
    return "[" + ", ".join(scap.cel_string(i) for i in items) + "]"


def tenant_namespaces(repo: Repo) -> list[str]:
    return sorted({ns for t in repo.tenants for ns in t.spec.namespaces})


def policies(repo: Repo) -> list[dict[str, Any]]:
    """The three policies and their bindings, as objects."""
    namespaces = tenant_namespaces(repo)
    kinds = list(repo.provider_kinds)
    found = [
        _policy(rules.TENANCY, [rules.TENANCY_VALIDATION],
                [rules.Variable(rules.TENANT_NAMESPACES_VARIABLE, _cel_list(namespaces))]),
        _binding(rules.TENANCY, rules.TENANCY, ["Deny"]),
        _policy(rules.SCHEDULE_KINDS, [rules.schedule_kind_validation(kinds)],
                [rules.Variable(rules.SCHEDULE_KINDS_VARIABLE, _cel_list(kinds))]),
        _binding(rules.SCHEDULE_KINDS, rules.SCHEDULE_KINDS, ["Deny"]),
    ]
    if repo.tenants:
        found.append(_policy(
            rules.TENANT_LIMITS, list(rules.TENANT_LIMIT_VALIDATIONS),
            list(rules.TENANT_LIMIT_VARIABLES),
            {"apiVersion": tenant_limit.API_VERSION, "kind": tenant_limit.KIND},
            rules.TENANT_LIMITS_FAILURE_POLICY))
        found += [tenant_binding(t) for t in repo.tenants]
    return found


def author_policies(repo: Repo) -> list[dict[str, Any]]:
    """The author-rights policies and their bindings: ScheduledCapacity's with consumers,
    ScheduledMachine's with a MachineProvisioning."""
    found = []
    if repo.has_capacity:
        consumers = {(c.spec.group, c.spec.kind): c.spec.resource for c in repo.consumers}
        found += [_policy(rules.SCAP_AUTHOR_RIGHTS, [rules.SCAP_AUTHOR_VALIDATION],
                          rules.scap_author_variables(consumers)),
                  _binding(rules.SCAP_AUTHOR_RIGHTS, rules.SCAP_AUTHOR_RIGHTS, ["Deny"])]
    if repo.machines is not None:
        spec = repo.machines.spec
        found += [_policy(rules.MACHINE_AUTHOR_RIGHTS, rules.MACHINE_AUTHOR_VALIDATIONS,
                          rules.machine_author_variables(
                              {(k.group, k.kind): k.resource for k in spec.bootstrap},
                              {(k.group, k.kind): k.resource for k in spec.infrastructure}),
                          match=_MATCH_MACHINES),
                  _binding(rules.MACHINE_AUTHOR_RIGHTS, rules.MACHINE_AUTHOR_RIGHTS, ["Deny"])]
    return found


def scale_guard_name(consumer: CapacityConsumer) -> str:
    return f"{rules.TARGET_GUARD_SCALE}-{consumer.metadata.name}"


def scale_guard_policies(repo: Repo) -> list[dict[str, Any]]:
    """The target guard's half in the API server (decision 0050): for each consumer written
    through `/scale`, a policy on the capacity identity's writes of that subresource, holding the
    value within the consumer's ceiling (the API server already lets such a write change nothing
    but `spec.replicas`), and its binding. The webhook's target guard no longer sees those
    writes (`fivespot.compiler.emit.webhook.consumer_rules`)."""
    found = []
    for consumer in sorted(repo.consumers, key=lambda c: c.metadata.name):
        spec = consumer.spec
        if not through_scale(spec.group, spec.kind, spec.capacity_paths):
            continue
        name = scale_guard_name(consumer)
        policy = _policy(name, [rules.SCALE_VALUE_VALIDATION],
                         [rules.max_active_value_variable(spec.max_active_value)])
        policy["spec"]["matchConstraints"] = {"resourceRules": [{
            "apiGroups": [spec.group], "apiVersions": ["*"], "operations": ["UPDATE"],
            "resources": [f"{spec.resource}/scale"],
        }]}
        policy["spec"]["matchConditions"] = [rules.capacity_identity_condition(
            service_account_user(repo.namespace, CAPACITY_CONTROLLER))]
        found += [policy, _binding(name, name, ["Deny"])]
    return found


def tenant_binding_name(tenant: TenantPolicy) -> str:
    return f"{rules.TENANT_LIMITS}-{tenant.metadata.name}"


def tenant_binding(tenant: TenantPolicy) -> dict[str, Any]:
    return _binding(
        tenant_binding_name(tenant), rules.TENANT_LIMITS,
        [a.value for a in tenant.spec.validation_actions],
        {
            "paramRef": {"name": tenant.metadata.name, "parameterNotFoundAction": "Deny"},
            "matchResources": {"namespaceSelector": {"matchExpressions": [{
                "key": "kubernetes.io/metadata.name", "operator": "In",
                "values": sorted(tenant.spec.namespaces),
            }]}},
        },
    )


def tenant_params(repo: Repo, tenant: TenantPolicy) -> dict[str, Any]:
    consumers = []
    for name in sorted(tenant.spec.consumers):
        consumer = repo.consumer(name).spec
        entry: dict[str, Any] = {
            "group": consumer.group, "kind": consumer.kind,
            "capacityPaths": list(consumer.capacity_paths),
            "maxActiveValue": consumer.max_active_value,
        }
        if consumer.drained_path:
            entry["drainedPath"] = consumer.drained_path
        consumers.append(entry)
    return {
        "apiVersion": tenant_limit.API_VERSION, "kind": tenant_limit.KIND,
        "metadata": metadata(tenant.metadata.name, COMPONENT),
        "spec": {
            "tenantPolicy": tenant.metadata.name,
            "namespaces": sorted(tenant.spec.namespaces),
            "maxActiveValue": tenant.spec.max_active_value,
            "allowedNodes": sorted(tenant.spec.allowed_nodes),
            "consumers": consumers,
        },
    }


def params(repo: Repo) -> list[dict[str, Any]]:
    return [tenant_params(repo, t) for t in repo.tenants]


def emit(repo: Repo) -> list[Artifact]:
    found = policies(repo) if repo.emits_vaps else []
    if repo.platform.spec.serves_vaps:
        found += author_policies(repo) + scale_guard_policies(repo)
    artifacts = []
    for obj in found:
        suffix = "policy" if obj["kind"] == "ValidatingAdmissionPolicy" else "binding"
        artifacts.append(Artifact(ADMISSION, f"{ADMISSION}/vap/{obj['metadata']['name']}.{suffix}.yaml", obj))
    for obj in params(repo) if repo.emits_vaps else []:
        artifacts.append(Artifact(ADMISSION, f"{ADMISSION}/params/{obj['metadata']['name']}.yaml", obj))
    return artifacts
