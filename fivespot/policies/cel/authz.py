"""The `authorizer` of a ValidatingAdmissionPolicy, offline: a stated assumption, never RBAC.

In the API server, `authorizer.group('apps').resource('deployments').namespace(ns).name(n)
.check('patch').allowed()` asks the cluster's authorizers (RBAC, webhooks) whether the requesting
user may do that. Nothing offline knows a user's rights, so the evaluator's `authorizer` is one
of two stated assumptions, carried in the CEL value itself (so a verdict is a function of the
request and the assumption, and memoising verdicts stays exact):

- `ASSUMED`: every check is allowed (`fivespot check` and `fivespot test` without the user's
  roles, `fivespot audit`, the webhook's polyfill, the controllers). A verdict reached this way
  says so (`Verdict.assumed`); it is never RBAC's approval.
- `stated(rules)`: the rules of the Roles and ClusterRoles the user holds, decided as RBAC
  decides them (`k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac` `RuleAllows`): a Role's rules
  in its own namespace, a ClusterRole's everywhere; verbs, API groups, resources (`*`,
  `resource/subresource`, `*/subresource`), resource names, non-resource URLs (`*`, a trailing
  `*` prefix). Nothing is inherited from groups or aggregated roles: the rules given are all.

The functions are those of Kubernetes' Authz library (`k8s.io/apiserver/pkg/cel/library/authz.go`):
`path`, `group`, `serviceAccount`, `resource`, `subresource`, `namespace`, `name`, `check`,
`allowed`, `reason`, `errored`, `error` (not the selector functions). `serviceAccount(ns, name)`
asks about another identity, whose rights are never stated: always ASSUMED.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from msgspec import Struct

TAG: Final = "@kubernetes"
AUTHORIZER: Final = "kubernetes.Authorizer"
GROUP_CHECK: Final = "kubernetes.GroupCheck"
RESOURCE_CHECK: Final = "kubernetes.ResourceCheck"
PATH_CHECK: Final = "kubernetes.PathCheck"
DECISION: Final = "kubernetes.Decision"
_ALL: Final = "*"

ASSUMED_REASON: Final = ("assumed allowed offline: the user's RBAC is not known here (state it "
                         "with the user's roles)")


class Rule(Struct, frozen=True):
    """One RBAC PolicyRule, with where it applies: a namespace (a Role's), or None (a
    ClusterRole's: every namespace, and cluster-scoped resources)."""

    verbs: tuple[str, ...]
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()
    namespace: str | None = None

    def value(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "verbs": list(self.verbs),
                "apiGroups": list(self.api_groups), "resources": list(self.resources),
                "resourceNames": list(self.resource_names),
                "nonResourceURLs": list(self.non_resource_urls)}


def assumed() -> dict[str, Any]:
    """The authorizer that allows every check (and says it assumed so)."""
    return {TAG: AUTHORIZER, "assumed": True, "source": "", "rules": []}


ASSUMED: Final = assumed()


def stated(rules: Iterable[Rule], source: str) -> dict[str, Any]:
    """The authorizer deciding by these rules alone; `source` names where they were stated
    (the reason of an allowed decision cites it)."""
    return {TAG: AUTHORIZER, "assumed": False, "source": source,
            "rules": [rule.value() for rule in rules]}


def is_assumed(authorizer: Mapping[str, Any] | None) -> bool:
    """Whether checks against this `authorizer` value are assumed rather than decided."""
    return authorizer is None or bool(authorizer.get("assumed", True))


# --- the library's functions (values are tagged CEL maps) --------------------------------------


class AuthzError(ValueError):
    """A function applied to a value of the wrong kind (a CEL `no such overload`)."""


def _expect(value: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or value.get(TAG) != kind:
        raise AuthzError(f"no such overload: expected a {kind}")
    return value


def path(authorizer: Mapping[str, Any], url: str) -> dict[str, Any]:
    return {TAG: PATH_CHECK, "authorizer": dict(_expect(authorizer, AUTHORIZER)), "path": url}


def group(authorizer: Mapping[str, Any], name: str) -> dict[str, Any]:
    return {TAG: GROUP_CHECK, "authorizer": dict(_expect(authorizer, AUTHORIZER)), "group": name}


def service_account(authorizer: Mapping[str, Any], namespace: str, name: str) -> dict[str, Any]:
    _expect(authorizer, AUTHORIZER)
    return assumed()


def resource(group_check: Mapping[str, Any], name: str) -> dict[str, Any]:
    found = _expect(group_check, GROUP_CHECK)
    return {TAG: RESOURCE_CHECK, "authorizer": found["authorizer"], "group": found["group"],
            "resource": name, "subresource": "", "namespace": "", "name": ""}


def _with(field: str) -> Any:
    def impl(resource_check: Mapping[str, Any], value: str) -> dict[str, Any]:
        return {**_expect(resource_check, RESOURCE_CHECK), field: value}

    return impl


subresource = _with("subresource")
namespace = _with("namespace")
name = _with("name")


def check(target: Mapping[str, Any], verb: str) -> dict[str, Any]:
    """The Decision of a ResourceCheck (a verb) or a PathCheck (an HTTP verb)."""
    if not isinstance(target, Mapping) or target.get(TAG) not in (RESOURCE_CHECK, PATH_CHECK):
        raise AuthzError("no such overload: check() of a ResourceCheck or a PathCheck")
    authorizer = _expect(target["authorizer"], AUTHORIZER)
    if is_assumed(authorizer):
        return _decision(True, ASSUMED_REASON)
    rules = [r for r in authorizer.get("rules") or () if isinstance(r, Mapping)]
    if target[TAG] == PATH_CHECK:
        allowed = any(_path_allowed(rule, str(target["path"]), verb.lower()) for rule in rules)
    else:
        allowed = any(_resource_allowed(rule, target, verb) for rule in rules)
    return _decision(allowed, f"allowed by {authorizer.get('source')}" if allowed else "")


def _decision(allowed: bool, reason: str) -> dict[str, Any]:
    return {TAG: DECISION, "allowed": allowed, "reason": reason}


def allowed(decision: Mapping[str, Any]) -> bool:
    return bool(_expect(decision, DECISION)["allowed"])


def reason(decision: Mapping[str, Any]) -> str:
    return str(_expect(decision, DECISION)["reason"])


def errored(decision: Mapping[str, Any]) -> bool:
    _expect(decision, DECISION)
    return False


def error(decision: Mapping[str, Any]) -> str:
    _expect(decision, DECISION)
    return ""


# --- RBAC's rule matching ------------------------------------------------------------------------


def _listed(values: Sequence[str], wanted: str) -> bool:
    return _ALL in values or wanted in values


def _resource_allowed(rule: Mapping[str, Any], target: Mapping[str, Any], verb: str) -> bool:
    rule_namespace = rule.get("namespace")
    if rule_namespace is not None and rule_namespace != target["namespace"]:
        return False
    if not _listed(rule.get("verbs") or (), verb):
        return False
    if not _listed(rule.get("apiGroups") or (), str(target["group"])):
        return False
    sub = str(target["subresource"])
    combined = f"{target['resource']}/{sub}" if sub else str(target["resource"])
    if not any(r == _ALL or r == combined or (sub and r == f"*/{sub}")
               for r in rule.get("resources") or ()):
        return False
    names = rule.get("resourceNames") or ()
    return not names or str(target["name"]) in names


def _path_allowed(rule: Mapping[str, Any], url: str, verb: str) -> bool:
    if rule.get("namespace") is not None or not _listed(rule.get("verbs") or (), verb):
        return False
    return any(u == _ALL or u == url or (u.endswith(_ALL) and url.startswith(u[:-1]))
               for u in rule.get("nonResourceURLs") or ())
