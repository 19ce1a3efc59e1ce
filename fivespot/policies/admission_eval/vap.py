"""ValidatingAdmissionPolicies and their bindings, evaluated as the API server evaluates them.

For each binding whose policy exists: the request must match the policy's `matchConstraints`
and the binding's `matchResources` (resource rules, namespace selector against the namespace's
labels, object selector against the object's or old object's labels); the params are looked up
from `paramRef` (a missing one is a configuration error when `parameterNotFoundAction: Deny`);
`matchConditions` must all be true; `variables` are evaluated lazily, in order, when a validation
first reads them; each failing validation's message comes from `messageExpression`, else
`message`, else `failed expression: ...`. Evaluation and configuration errors follow the
policy's `failurePolicy`. Each failure is then acted on per the binding's `validationActions`:
Deny (a violation, worded as the API server words it), Warn (a warning), Audit (recorded).

All CEL is compiled once in `PolicySet.compile`; a request only evaluates.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from msgspec import Struct, field
from msgspec.structs import force_setattr

from fivespot.policies import memo
from fivespot.policies.admission_eval import batch, projection, selectors
from fivespot.policies.admission_eval.fields import field_of
from fivespot.policies.admission_eval.result import VAP, Violation
from fivespot.policies.cel import (
    ADMISSION_VARIABLES,
    Bound,
    CelCompileError,
    CelEvaluationError,
    Program,
    bind,
    compile_expression,
)
from fivespot.policies.cel import authz, checked

POLICY_KIND: Final = "ValidatingAdmissionPolicy"
BINDING_KIND: Final = "ValidatingAdmissionPolicyBinding"
GROUP: Final = "admissionregistration.k8s.io"
VERSION: Final = "v1"
POLICY_PLURAL: Final = "validatingadmissionpolicies"
BINDING_PLURAL: Final = "validatingadmissionpolicybindings"
_ALL: Final = "*"


class PolicyConfigError(ValueError):
    """A policy or binding that cannot be compiled (bad CEL, bad selector)."""


class NamespaceRequired(LookupError):
    """Deciding needs the namespace object (its labels), and it was not given."""

    def __init__(self, namespace: str, needed_by: str) -> None:
        super().__init__(f"namespace {namespace!r} is needed by {needed_by}")
        self.namespace = namespace
        self.needed_by = needed_by


class _Named(Struct, frozen=True, eq=False):
    name: str
    program: Program
    needs: frozenset[str]
    """Variables the expression reads (directly)."""


class Validation(Struct, frozen=True, eq=False):
    expression: str
    program: Program
    needs: frozenset[str]
    message: str | None
    message_expression: Program | None
    message_needs: frozenset[str]
    reason: str
    field: str | None


class Match(Struct, frozen=True, eq=False):
    """`matchConstraints` / `matchResources`.

    Whether the resource rules match depends only on a few request attributes (operation,
    resource, subresource, whether namespaced, and the name when a rule lists `resourceNames`),
    and a namespace selector that reads only `kubernetes.io/metadata.name` depends only on the
    namespace's name; both answers are memoised here, so a request pays one dict lookup each.
    """

    namespace_selector: Mapping[str, Any] | None
    object_selector: Mapping[str, Any] | None
    rules: tuple[Mapping[str, Any], ...]
    exclude_rules: tuple[Mapping[str, Any], ...]
    has_rules: bool
    uses_names: bool = True
    namespace_selects_all: bool | None = None
    """None when it could not be precomputed (a malformed selector: decided per request)."""
    namespace_by_name: bool = False
    """The namespace selector reads no label but the name label."""
    object_selects_all: bool | None = None
    _by_request: dict[tuple[Any, ...], bool] = field(default_factory=dict)
    _by_namespace: dict[str, bool] = field(default_factory=dict)

    @classmethod
    def parse(cls, spec: Mapping[str, Any] | None) -> Match | None:
        if spec is None:
            return None
        rules = tuple(spec.get("resourceRules") or ())
        exclude_rules = tuple(spec.get("excludeResourceRules") or ())
        namespace_selector = spec.get("namespaceSelector")
        object_selector = spec.get("objectSelector")
        try:
            uses_names = any(bool(rule.get("resourceNames")) for rule in rules + exclude_rules)
        except AttributeError:
            uses_names = True
        try:
            namespace_all: bool | None = selectors.is_empty(namespace_selector)
            by_name = not selectors.keys(namespace_selector) - {selectors.NAME_LABEL}
        except (AttributeError, TypeError):
            namespace_all, by_name = None, False
        try:
            object_all: bool | None = selectors.is_empty(object_selector)
        except (AttributeError, TypeError):
            object_all = None
        return cls(
            namespace_selector=namespace_selector,
            object_selector=object_selector,
            rules=rules,
            exclude_rules=exclude_rules,
            has_rules="resourceRules" in spec,
            uses_names=uses_names,
            namespace_selects_all=namespace_all,
            namespace_by_name=by_name,
            object_selects_all=object_all,
        )

    def resources_match(self, attributes: Attributes, constraints: bool) -> bool:
        """`resourceRules` (when they apply) match and no `excludeResourceRules` does."""
        key = attributes.resource_key
        if key is None:
            return self._resources_match(attributes.request, constraints)
        if self.uses_names:
            key = (*key, str(attributes.request.get("name", "")))
        key = (*key, constraints)
        found = self._by_request.get(key)
        if found is None:
            found = memo.remember(self._by_request, key,
                                  self._resources_match(attributes.request, constraints))
        return found

    def _resources_match(self, request: Mapping[str, Any], constraints: bool) -> bool:
        if constraints or self.has_rules:
            if not any(_rule_matches(rule, request) for rule in self.rules):
                return False
        return not any(_rule_matches(rule, request) for rule in self.exclude_rules)

    def namespace_by_name_matches(self, namespace: str,
                                  namespace_object: Mapping[str, Any] | None) -> bool:
        """The namespace selector's verdict when it reads only the name label (memoised)."""
        found = self._by_namespace.get(namespace)
        if found is None:
            found = selectors.matches(self.namespace_selector,
                                      selectors.namespace_labels(namespace, namespace_object))
            memo.remember(self._by_namespace, namespace, found)
        return found


class Policy(Struct, frozen=True, eq=False):
    name: str
    failure_policy: str
    match: Match | None
    match_conditions: tuple[_Named, ...]
    variables: tuple[_Named, ...]
    validations: tuple[Validation, ...]
    param_kind: tuple[str, str] | None
    reads_namespace_object: bool
    all_pass: Program | None = None
    reads_authorizer: bool = False
    """Some expression asks the `authorizer` (offline, an assumption unless rights are stated)."""
    """Every validation and variable in one program (`cel.bind` for the variables): when it is
    true, every validation is true, in one evaluation. Otherwise the lazy path decides."""
    reads: dict[str, projection.Paths] | None = None
    """What its variables, match conditions, validations and messages can observe of the
    request's variables (None: not worked out, use them whole)."""
    owner: str = ""
    """How errors name it: `ValidatingAdmissionPolicy 'name'`."""

    def __post_init__(self) -> None:
        force_setattr(self, "owner", f"ValidatingAdmissionPolicy {self.name!r}")


class Binding(Struct, frozen=True, eq=False):
    name: str
    policy_name: str
    actions: tuple[str, ...]
    param_ref: Mapping[str, Any] | None
    match: Match | None
    owner: str = ""
    """How errors name it: `ValidatingAdmissionPolicyBinding 'name'`."""

    def __post_init__(self) -> None:
        force_setattr(self, "owner", f"ValidatingAdmissionPolicyBinding {self.name!r}")


class Outcome(Struct, frozen=True):
    """What the bound policies decided for one request."""

    violations: tuple[Violation, ...] = ()
    warnings: tuple[str, ...] = ()
    audit: tuple[str, ...] = ()
    assumed: tuple[str, ...] = ()
    """The policies that matched and ask the authorizer, decided with it assumed to allow."""


class Attributes:
    """The request as matching sees it (the AdmissionRequest, plus the namespace object), with
    what every binding reads worked out once per request."""

    __slots__ = ("request", "object", "old_object", "namespace_object", "namespace", "authorizer",
                 "_bound", "_cel_request", "_resource_key", "_projections")

    def __init__(self, request: Mapping[str, Any], obj: Mapping[str, Any] | None,
                 old_object: Mapping[str, Any] | None,
                 namespace_object: Mapping[str, Any] | None,
                 authorizer: Mapping[str, Any] = authz.ASSUMED) -> None:
        self.request = request
        self.object = obj
        self.old_object = old_object
        self.namespace_object = namespace_object
        self.authorizer = authorizer
        self.namespace = str(request.get("namespace") or "")
        self._bound: dict[int, Bound] = {}
        self._cel_request: dict[str, Any] | None = None
        self._resource_key: tuple[Any, ...] | None | bool = False
        self._projections: dict[int, dict[str, Any]] = {}

    @property
    def cel_request(self) -> dict[str, Any]:
        if self._cel_request is None:
            self._cel_request = _cel_request(self.request)
        return self._cel_request

    @property
    def resource_key(self) -> tuple[Any, ...] | None:
        """What resource-rule matching reads of the request (but the name), as a hashable key;
        None when the request is malformed enough that it has none (matching then raises or
        decides as it would without the memo)."""
        if self._resource_key is False:
            try:
                resource = self.request.get("resource") or {}
                key = (str(self.request.get("operation", "")), resource.get("group", ""),
                       resource.get("version", ""), str(resource.get("resource", "")),
                       str(self.request.get("subResource") or ""), bool(self.request.get("namespace")))
                hash(key)
                self._resource_key = key
            except (AttributeError, TypeError):
                self._resource_key = None
        return self._resource_key  # type: ignore[return-value]

    def shared(self, param: Mapping[str, Any] | None,
               reads: Mapping[str, projection.Paths] | None = None) -> Bound:
        """The activation (no variables) for these params, converted once per request.

        With `reads` (what the programs evaluated against it can observe, see `projection`),
        each variable is cut down to that, so converting it into CEL costs only what is read.
        """
        key = id(param)
        if key not in self._bound:
            if reads is None:
                data = {
                    "object": self.object, "oldObject": self.old_object, "request": self.cel_request,
                    "params": param, "namespaceObject": self.namespace_object,
                    "authorizer": self.authorizer,
                    "variables": {},
                }
            else:
                data = self.projected(reads)
                data["params"] = projection.project(param, reads["params"]) if "params" in reads else param
            self._bound[key] = bind(ADMISSION_VARIABLES, data)
        return self._bound[key]

    def projected(self, reads: Mapping[str, projection.Paths]) -> dict[str, Any]:
        """The request's variables but params, cut down to `reads` (worked out once per request
        and `reads`); a new dict each call."""
        found = self._projections.get(id(reads))
        if found is None:
            def cut(name: str, value: Any) -> Any:
                return projection.project(value, reads[name]) if name in reads else value
            request = (_projected_cel_request(self.request, reads["request"]) if "request" in reads
                       else self.cel_request)
            found = {
                "object": cut("object", self.object), "oldObject": cut("oldObject", self.old_object),
                "request": request, "namespaceObject": cut("namespaceObject", self.namespace_object),
                "authorizer": self.authorizer, "variables": {},
            }
            self._projections[id(reads)] = found
        return dict(found)


def _reads_authorizer(program: Program) -> bool:
    return any(isinstance(node, checked.Ident) and node.name == "authorizer"
               for node in checked.walk(program.tree.root))


def _reads(program: Program) -> tuple[frozenset[str], bool, bool]:
    """(variables read by name, whether `variables` is read some other way, reads namespaceObject)."""
    names: set[str] = set()
    other = False
    namespace = False
    selected: set[int] = set()
    for node in checked.walk(program.tree.root):
        if isinstance(node, checked.Select) and isinstance(node.operand, checked.Ident) and (
                node.operand.name == "variables"):
            names.add(node.field)
            selected.add(node.operand.id)
    for node in checked.walk(program.tree.root):
        if isinstance(node, checked.Ident):
            if node.name == "variables" and node.id not in selected:
                other = True
            if node.name == "namespaceObject":
                namespace = True
    return frozenset(names), other, namespace


def _compile(expression: str, where: str) -> Program:
    try:
        return compile_expression(expression, ADMISSION_VARIABLES)
    except CelCompileError as error:
        raise PolicyConfigError(f"{where}: {error.message}") from None


def _by_kind(params: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], tuple[Mapping[str, Any], ...]]:
    """Params objects by (apiVersion, kind), in the order given."""
    found: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for obj in params:
        found.setdefault((str(obj.get("apiVersion", "")), str(obj.get("kind", ""))), []).append(obj)
    return {key: tuple(objects) for key, objects in found.items()}


def compile_policy(obj: Mapping[str, Any]) -> Policy:
    """Compile a ValidatingAdmissionPolicy object; raises PolicyConfigError."""
    name = str((obj.get("metadata") or {}).get("name", ""))
    spec = obj.get("spec") or {}
    where = f"ValidatingAdmissionPolicy {name}"
    reads_namespace = False
    all_variable_names = [str(v.get("name", "")) for v in spec.get("variables") or ()]

    def named(entries: Iterable[Mapping[str, Any]], what: str) -> tuple[_Named, ...]:
        nonlocal reads_namespace
        out = []
        for entry in entries:
            program = _compile(str(entry.get("expression", "")), f"{where} {what} {entry.get('name')}")
            needs, other, namespace = _reads(program)
            reads_namespace |= namespace
            out.append(_Named(str(entry.get("name", "")), program,
                              frozenset(all_variable_names) if other else needs))
        return tuple(out)

    variables = named(spec.get("variables") or (), "variable")
    conditions = named(spec.get("matchConditions") or (), "matchCondition")
    validations = []
    for index, entry in enumerate(spec.get("validations") or ()):
        expression = str(entry.get("expression", ""))
        program = _compile(expression, f"{where} validations[{index}]")
        needs, other, namespace = _reads(program)
        message_expression = None
        message_needs: frozenset[str] = frozenset()
        if entry.get("messageExpression"):
            message_expression = _compile(str(entry["messageExpression"]),
                                          f"{where} validations[{index}].messageExpression")
            message_needs, message_other, message_ns = _reads(message_expression)
            if message_other:
                message_needs = frozenset(all_variable_names)
            namespace |= message_ns
        reads_namespace |= namespace
        validations.append(Validation(
            expression=expression, program=program,
            needs=frozenset(all_variable_names) if other else needs,
            message=entry.get("message") or None, message_expression=message_expression,
            message_needs=message_needs, reason=str(entry.get("reason") or "Invalid"),
            field=field_of(name, expression),
        ))
    param_kind = spec.get("paramKind")
    all_pass = _all_pass(spec) if validations else None
    reads: dict[str, projection.Paths] = {}
    for program in (*(v.program for v in variables), *(c.program for c in conditions),
                    *(v.program for v in validations),
                    *(v.message_expression for v in validations if v.message_expression)):
        projection.merge(reads, projection.reads(program.tree.root, ADMISSION_VARIABLES))
    return Policy(
        reads=reads,
        reads_authorizer=any(_reads_authorizer(program) for program in (
            *(v.program for v in variables), *(c.program for c in conditions),
            *(v.program for v in validations),
            *(v.message_expression for v in validations if v.message_expression))),
        name=name,
        failure_policy=str(spec.get("failurePolicy") or "Fail"),
        match=Match.parse(spec.get("matchConstraints")),
        match_conditions=conditions,
        variables=variables,
        validations=tuple(validations),
        param_kind=(str(param_kind.get("apiVersion", "")), str(param_kind.get("kind", "")))
        if param_kind else None,
        reads_namespace_object=reads_namespace,
        all_pass=all_pass,
    )


def _all_pass(spec: Mapping[str, Any]) -> Program | None:
    """`cel.bind(variables, {...}, v1 && v2 && ...)`, variables bound eagerly in order.

    Exact as a shortcut: `&&` is true only when every operand is true (an error or a false
    anywhere makes it not true), and an eagerly evaluated variable that errors only makes it
    not true. None when it does not compile (the lazy path is then the only path).
    """
    body = " && ".join(f"({entry.get('expression', '')})" for entry in spec.get("validations") or ())
    names: list[str] = []
    levels = []
    for variable in spec.get("variables") or ():
        name = str(variable.get("name", ""))
        entries = [f"{json.dumps(n)}: dyn(variables.{n})" for n in names if n != name]
        entries.append(f"{json.dumps(name)}: dyn({variable.get('expression', '')})")
        levels.append("{" + ", ".join(entries) + "}")
        names = [n for n in names if n != name] + [name]
    expression = body
    for level in reversed(levels):
        expression = f"cel.bind(variables, {level}, {expression})"
    try:
        return compile_expression(expression, ADMISSION_VARIABLES)
    except CelCompileError:
        return None


def compile_binding(obj: Mapping[str, Any]) -> Binding:
    name = str((obj.get("metadata") or {}).get("name", ""))
    spec = obj.get("spec") or {}
    return Binding(
        name=name,
        policy_name=str(spec.get("policyName", "")),
        actions=tuple(spec.get("validationActions") or ()),
        param_ref=spec.get("paramRef"),
        match=Match.parse(spec.get("matchResources")),
    )


# --- matching ---------------------------------------------------------------------------------


def _rule_matches(rule: Mapping[str, Any], request: Mapping[str, Any]) -> bool:
    resource = request.get("resource") or {}
    operation = str(request.get("operation", ""))
    operations = rule.get("operations") or ()
    if _ALL not in operations and operation not in operations:
        return False
    groups = rule.get("apiGroups") or ()
    if _ALL not in groups and resource.get("group", "") not in groups:
        return False
    versions = rule.get("apiVersions") or ()
    if _ALL not in versions and resource.get("version", "") not in versions:
        return False
    plural = str(resource.get("resource", ""))
    sub = str(request.get("subResource") or "")
    full = f"{plural}/{sub}" if sub else plural
    resources = rule.get("resources") or ()
    if not any(r == _ALL and not sub or r == "*/*" or r == full or (
            r == f"{plural}/*" and sub) or (r.startswith("*/") and sub and r[2:] == sub)
            for r in resources):
        return False
    scope = rule.get("scope") or _ALL
    namespaced = bool(request.get("namespace"))
    if scope == "Namespaced" and not namespaced or scope == "Cluster" and namespaced:
        return False
    names = rule.get("resourceNames") or ()
    if names and str(request.get("name", "")) not in names:
        return False
    return True


def _matches(match: Match | None, attributes: Attributes, owner: str, *, constraints: bool) -> bool:
    if match is None:
        return True
    if not match.resources_match(attributes, constraints):
        return False
    if match.namespace_selects_all is not True and not _namespace_matches(match, attributes, owner):
        return False
    selector = match.object_selector
    if match.object_selects_all is not True and not selectors.is_empty(selector):
        new_labels = _labels(attributes.object)
        old_labels = _labels(attributes.old_object)
        if not (attributes.object is not None and selectors.matches(selector, new_labels)) and not (
                attributes.old_object is not None and selectors.matches(selector, old_labels)):
            return False
    return True


def _may_match_group(match: Match | None, group: str) -> bool:
    """Whether a write of an object itself in `group` may match: a rule naming only
    subresources (`deployments/scale`) never does."""
    if match is None or not match.has_rules:
        return True
    try:
        return any((_ALL in groups or group in groups) and _names_an_object(resources)
                   for groups, resources in ((rule.get("apiGroups") or (), rule.get("resources") or ())
                                             for rule in match.rules))
    except (AttributeError, TypeError):
        return True


def _names_an_object(resources: Iterable[object]) -> bool:
    """`resources` of a rule include objects themselves, not only their subresources."""
    found = list(resources)
    return not found or any(not isinstance(r, str) or "/" not in r or r == "*/*" for r in found)


def _is_static(match: Match | None) -> bool:
    """Whether the match's verdict for a namespaced request depends only on the request's
    resource, name and namespace name."""
    return match is None or (match.object_selects_all is True and (
        match.namespace_selects_all is True or match.namespace_by_name))


def _labels(obj: Mapping[str, Any] | None) -> dict[str, str]:
    if obj is None:
        return {}
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _namespace_matches(match: Match, attributes: Attributes, owner: str) -> bool:
    selector = match.namespace_selector
    if selectors.is_empty(selector):
        return True
    namespace = attributes.namespace
    request = attributes.request
    if not namespace:
        resource = request.get("resource") or {}
        if resource.get("group", "") == "" and resource.get("resource") == "namespaces":
            target = attributes.object or attributes.old_object or {}
            name = str((target.get("metadata") or {}).get("name", ""))
            return selectors.matches(selector, selectors.namespace_labels(name, target))
        return True  # cluster-scoped objects are not filtered by namespace
    if match.namespace_by_name:
        return match.namespace_by_name_matches(namespace, attributes.namespace_object)
    needs_object = bool(selectors.keys(selector) - {selectors.NAME_LABEL})
    if needs_object and attributes.namespace_object is None:
        raise NamespaceRequired(namespace, owner)
    return selectors.matches(selector, selectors.namespace_labels(namespace, attributes.namespace_object))


# --- the policy set -----------------------------------------------------------------------------


class PolicySet(Struct, frozen=True, eq=False):
    """Compiled policies, bindings and params objects, ready to decide requests."""

    policies: dict[str, Policy]
    bindings: tuple[Binding, ...]
    params: dict[tuple[str, str], tuple[Mapping[str, Any], ...]] = field(default_factory=dict)
    _params_memo: dict[tuple[Binding, str], tuple[tuple[Mapping[str, Any], ...], str | None]] = field(
        default_factory=dict)
    """`_params` by (binding, request namespace): the params objects never change after compile."""
    _shortcut_reads: dict[str, projection.Paths] = field(default_factory=dict)
    """What the policies' all-validations programs can observe of each variable (the shared
    activation holds only that)."""
    _plans: dict[tuple[Any, ...], tuple[tuple[Policy, Binding], ...]] = field(
        default_factory=dict)
    """The matching (policy, binding) pairs by request key, when matching is static."""
    _static: bool = False
    """Whether every match depends only on resource, name and namespace name (no object
    selectors, namespace selectors on the name label at most)."""
    _names_matter: bool = True
    _batches: dict[tuple[Any, ...], batch.Batch | None] = field(default_factory=dict)
    """The batch (see `batch`) of each plan's policies, by plan key."""

    def __post_init__(self) -> None:
        for policy in self.policies.values():
            if policy.all_pass is not None:
                projection.merge(self._shortcut_reads,
                                 projection.reads(policy.all_pass.tree.root, ADMISSION_VARIABLES))
        matches = [binding.match for binding in self.bindings]
        matches += [policy.match for policy in self.policies.values()]
        force_setattr(self, "_static", all(_is_static(m) for m in matches))
        force_setattr(self, "_names_matter", any(m is not None and m.uses_names for m in matches))

    @classmethod
    def compile(cls, objects: Iterable[Mapping[str, Any]],
                params: Iterable[Mapping[str, Any]] = ()) -> PolicySet:
        """From ValidatingAdmissionPolicy and -Binding objects (others are ignored) and the
        params objects; raises PolicyConfigError."""
        policies: dict[str, Policy] = {}
        bindings: list[Binding] = []
        for obj in objects:
            if obj.get("kind") == POLICY_KIND:
                policy = compile_policy(obj)
                policies[policy.name] = policy
            elif obj.get("kind") == BINDING_KIND:
                bindings.append(compile_binding(obj))
        return cls(policies, tuple(sorted(bindings, key=lambda b: b.name)), _by_kind(params))

    def with_params(self, params: Iterable[Mapping[str, Any]]) -> PolicySet:
        """These compiled policies and bindings with these params objects (and nothing
        memoised): the policies name their params' kinds, so a caller compiles once, then
        looks those objects up."""
        return PolicySet(self.policies, self.bindings, _by_kind(params))

    def may_match_group(self, group: str) -> bool:
        """Whether some policy's `matchConstraints` may match a resource of this API group (a
        binding can only narrow what its policy matches). A policy whose rules cannot be read
        may match anything."""
        return any(_may_match_group(policy.match, group) for policy in self.policies.values())

    @property
    def param_kinds(self) -> frozenset[tuple[str, str]]:
        return frozenset(p.param_kind for p in self.policies.values() if p.param_kind)

    def evaluate(self, request: Mapping[str, Any],
                 namespace_object: Mapping[str, Any] | None = None,
                 authorizer: Mapping[str, Any] = authz.ASSUMED) -> Outcome:
        """Decide an AdmissionRequest-shaped mapping (`operation`, `namespace`, `name`, `kind`,
        `resource`, `subResource`, `userInfo`, `object`, `oldObject`, `dryRun`, `options`).

        `authorizer` is the requesting user's, as `fivespot.policies.cel.authz` models it: assumed to
        allow everything unless the user's rights are stated (`authz.stated`).

        Raises NamespaceRequired when a selector or a policy needs the namespace object and
        `namespace_object` is None.
        """
        attributes = Attributes(request, request.get("object"), request.get("oldObject"),
                                namespace_object, authorizer)
        violations: list[Violation] = []
        warnings: list[str] = []
        audit: list[str] = []
        assumed: list[str] = []
        pairs, plan_key = self._matching(attributes)
        passed: frozenset[int] = frozenset()
        tried: frozenset[int] = frozenset()
        if plan_key is not None:
            together = self._batch(plan_key, pairs, attributes.namespace)
            if together is not None:
                passed, tried = together.passed(attributes.projected), together.covered
        for position, (policy, binding) in enumerate(pairs):
            if policy.reads_namespace_object and attributes.namespace and namespace_object is None:
                raise NamespaceRequired(attributes.namespace, f"{policy.owner} (namespaceObject)")
            if policy.reads_authorizer and authz.is_assumed(authorizer) and \
                    policy.name not in assumed:
                assumed.append(policy.name)
            if position in passed:
                continue
            # A batch member that did not pass has had its shortcut already: go straight on.
            for failure in self._failures(policy, binding, attributes, shortcut=position not in tried):
                self._act(policy, binding, failure, violations, warnings, audit)
        return Outcome(tuple(violations), tuple(warnings), tuple(audit), tuple(assumed))

    def _matching(self, attributes: Attributes
                  ) -> tuple[Iterable[tuple[Policy, Binding]], tuple[Any, ...] | None]:
        """The (policy, binding) pairs that match, in binding order, and the plan key when they
        come from the match table (else None).

        When matching is static, the pairs for a (resource key, name, namespace) are worked out
        once and looked up afterwards. Otherwise, or when working them out fails (a malformed
        selector), pairs are matched one at a time as evaluation proceeds, so an error surfaces
        exactly where it would have.
        """
        key = attributes.resource_key
        if not self._static or key is None or not attributes.namespace:
            return self._match_each(attributes), None
        name = str(attributes.request.get("name", "")) if self._names_matter else ""
        plan_key = (key, name, attributes.namespace)
        plan = self._plans.get(plan_key)
        if plan is None:
            try:
                plan = tuple(self._match_each(attributes))
            except Exception:  # noqa: BLE001 - decided again, lazily, where it surfaces
                return self._match_each(attributes), None
            if len(self._plans) >= memo.LIMIT:
                self._batches.clear()  # built per plan: they start over with the plans
            memo.remember(self._plans, plan_key, plan)
        return plan, plan_key

    def _batch(self, plan_key: tuple[Any, ...], plan: Iterable[tuple[Policy, Binding]],
               namespace: str) -> batch.Batch | None:
        """The batch of the plan's policies that have an all-validations program, no match
        conditions and exactly one params object (built once per plan key)."""
        if plan_key in self._batches:
            return self._batches[plan_key]
        entries = []
        for position, (policy, binding) in enumerate(plan):
            if policy.all_pass is None or policy.match_conditions:
                continue
            try:
                params, config_error = self._params(policy, binding, namespace)
            except Exception:  # noqa: BLE001 - raised again, in order, by the per-policy path
                continue
            if config_error is None and len(params) == 1:
                entries.append(batch.Entry(position, policy.all_pass, params[0]))
        found = batch.build(entries)
        self._batches[plan_key] = found
        return found

    def _match_each(self, attributes: Attributes) -> Iterator[tuple[Policy, Binding]]:
        for binding in self.bindings:
            policy = self.policies.get(binding.policy_name)
            if policy is None:
                continue
            if not _matches(policy.match, attributes, policy.owner, constraints=True):
                continue
            if not _matches(binding.match, attributes, binding.owner, constraints=False):
                continue
            yield policy, binding

    def _act(self, policy: Policy, binding: Binding, failure: _Failure, violations: list[Violation],
             warnings: list[str], audit: list[str]) -> None:
        for action in binding.actions:
            if action == "Deny":
                violations.append(Violation(
                    VAP, policy.name, failure.field,
                    f"ValidatingAdmissionPolicy '{policy.name}' with binding '{binding.name}' "
                    f"denied request: {failure.message}",
                    binding=binding.name, reason=failure.reason))
            elif action == "Warn":
                warnings.append(f"Validation failed for ValidatingAdmissionPolicy '{policy.name}' "
                                f"with binding '{binding.name}': {failure.message}")
            elif action == "Audit":
                audit.append(f"{policy.name}/{binding.name}: {failure.message}")

    def _params(self, policy: Policy, binding: Binding, namespace: str
                ) -> tuple[Sequence[Mapping[str, Any] | None], str | None]:
        """The params objects to evaluate with (None: no paramKind), or a configuration error."""
        if policy.param_kind is None:
            return (None,), None
        key = (binding, namespace)
        found = self._params_memo.get(key)
        if found is None:
            found = memo.remember(self._params_memo, key,
                                  self._find_params(policy, binding, namespace))
        return found

    def _find_params(self, policy: Policy, binding: Binding, namespace: str
                     ) -> tuple[tuple[Mapping[str, Any], ...], str | None]:
        assert policy.param_kind is not None
        ref = binding.param_ref
        if not ref:
            return (), "failed to configure binding: paramRef is required when paramKind is set"
        candidates = self.params.get(policy.param_kind, ())
        wanted_namespace = ref.get("namespace")
        found = []
        for obj in candidates:
            meta = obj.get("metadata") or {}
            obj_namespace = meta.get("namespace")
            if wanted_namespace is not None and obj_namespace != wanted_namespace:
                continue
            if wanted_namespace is None and obj_namespace and obj_namespace != namespace:
                continue
            if ref.get("name"):
                if meta.get("name") == ref["name"]:
                    found.append(obj)
            elif selectors.matches(ref.get("selector"), meta.get("labels") or {}):
                found.append(obj)
        if not found:
            if ref.get("parameterNotFoundAction", "Deny") == "Deny":
                return (), ("failed to configure binding: no params found for policy binding "
                            "with `Deny` parameterNotFoundAction")
            return (), None
        return tuple(found), None

    def _failures(self, policy: Policy, binding: Binding, attributes: Attributes,
                  shortcut: bool = True) -> list[_Failure]:
        params, config_error = self._params(policy, binding, attributes.namespace)
        if config_error is not None:
            if policy.failure_policy == "Ignore":
                return []
            return [_Failure(config_error, "Invalid", None)]
        failures: list[_Failure] = []
        for param in params:
            shared = None
            if shortcut and policy.all_pass is not None and not policy.match_conditions:
                shared = attributes.shared(param, self._shortcut_reads)
            failures += _evaluate(policy, attributes, param, shared)
        return failures


class _Failure(Struct, frozen=True):
    message: str
    reason: str
    field: str | None


class _Activation:
    """The CEL activation of one (policy, binding, params) evaluation.

    `variables` are evaluated lazily, in declaration order, the first time an expression reads
    them; an errored variable is left out (so an expression reading it errors, as in the API
    server) and its own error is reported instead of "no such key". The activation is converted
    into CEL once and rebuilt only when a new variable value has been added.
    """

    def __init__(self, policy: Policy, data: dict[str, Any]) -> None:
        self.policy = policy
        self.data = data
        self.values: dict[str, Any] = {}
        self.errors: dict[str, str] = {}
        data["variables"] = self.values
        self.bound: Bound | None = None

    def evaluate(self, program: Program, needs: frozenset[str]) -> object:
        """Evaluate `program` after the variables it reads; raises CelEvaluationError."""
        self._ensure(needs)
        if self.bound is None:
            self.bound = bind(ADMISSION_VARIABLES, {**self.data, "variables": dict(self.values)})
        return program.evaluate_bound(self.bound)

    def _ensure(self, names: frozenset[str]) -> None:
        if not names:
            return
        for variable in self.policy.variables:
            if variable.name in names and variable.name not in self.values and (
                    variable.name not in self.errors):
                try:
                    value = self.evaluate(variable.program, variable.needs)
                except CelEvaluationError as error:
                    self.errors[variable.name] = error.message
                else:
                    self.values[variable.name] = value
                    self.bound = None

    def explain(self, message: str, names: frozenset[str]) -> str:
        """A 'no such key' on an errored variable reads as that variable's own error."""
        for name in names:
            if name in self.errors and name in message:
                return self.errors[name]
        return message


def _evaluate(policy: Policy, attributes: Attributes, param: Mapping[str, Any] | None,
              shared: Bound | None) -> list[_Failure]:
    """`shared`: the request's activation with these params and no variables, or None."""
    if shared is not None:
        try:
            if policy.all_pass.evaluate_bound(shared) is True:  # type: ignore[union-attr]
                return []
        except CelEvaluationError:
            pass
    if policy.reads is None:
        data = {
            "object": attributes.object,
            "oldObject": attributes.old_object,
            "request": attributes.cel_request,
            "params": param,
            "namespaceObject": attributes.namespace_object,
            "authorizer": attributes.authorizer,
        }
    else:
        data = attributes.projected(policy.reads)
        del data["variables"]
        data["params"] = projection.project(param, policy.reads["params"]) if (
            "params" in policy.reads) else param
    activation = _Activation(policy, data)
    for condition in policy.match_conditions:
        try:
            matched = activation.evaluate(condition.program, condition.needs)
        except CelEvaluationError as error:
            if policy.failure_policy == "Ignore":
                return []
            return [_Failure(f"failed to evaluate match condition {condition.name!r}: "
                             f"{activation.explain(error.message, condition.needs)}", "Invalid",
                             None)]
        if matched is not True:
            return []
    failures = []
    for validation in policy.validations:
        try:
            result = activation.evaluate(validation.program, validation.needs)
        except CelEvaluationError as error:
            if policy.failure_policy != "Ignore":
                failures.append(_Failure(
                    f"expression '{validation.expression}' resulted in error: "
                    f"{activation.explain(error.message, validation.needs)}",
                    "Invalid", validation.field))
            continue
        if not isinstance(result, bool):
            if policy.failure_policy != "Ignore":
                failures.append(_Failure(
                    f"expression '{validation.expression}' resulted in error: "
                    f"validation failed: expression evaluated to {type(result).__name__}, not bool",
                    "Invalid", validation.field))
            continue
        if result:
            continue
        failures.append(_Failure(_message(validation, activation), validation.reason,
                                 validation.field))
    return failures


def _message(validation: Validation, activation: _Activation) -> str:
    if validation.message_expression is not None:
        try:
            text = activation.evaluate(validation.message_expression, validation.message_needs)
        except CelEvaluationError:
            text = None
        if isinstance(text, str) and text.strip() and "\n" not in text:
            return text.strip()
    if validation.message:
        return validation.message
    return f"failed expression: {validation.expression}"


_REQUEST_DEFAULTS: Final[Mapping[str, Any]] = {
    "uid": "", "kind": {"group": "", "version": "", "kind": ""},
    "resource": {"group": "", "version": "", "resource": ""}, "subResource": "",
    "name": "", "namespace": "", "operation": "", "dryRun": False, "options": None,
    "userInfo": {"username": "", "groups": []},
}


_REQUESTED_AS: Final[Mapping[str, str]] = {
    "requestKind": "kind", "requestResource": "resource", "requestSubResource": "subResource"}
_CEL_REQUEST_KEYS: Final = frozenset(_REQUEST_DEFAULTS) | frozenset(_REQUESTED_AS)


def _cel_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """`request` as CEL sees it: the AdmissionRequest without its objects."""
    out = {key: request.get(key, default) for key, default in _REQUEST_DEFAULTS.items()}
    out["requestKind"] = request.get("requestKind", out["kind"])
    out["requestResource"] = request.get("requestResource", out["resource"])
    out["requestSubResource"] = request.get("requestSubResource", out["subResource"])
    return out


def _cel_request_field(request: Mapping[str, Any], key: str) -> Any:
    """`_cel_request(request)[key]`, without building the rest."""
    if key in _REQUESTED_AS:
        plain = _REQUESTED_AS[key]
        return request.get(key, request.get(plain, _REQUEST_DEFAULTS[plain]))
    return request.get(key, _REQUEST_DEFAULTS[key])


def _projected_cel_request(request: Mapping[str, Any], paths: projection.Paths) -> dict[str, Any]:
    """`projection.project(_cel_request(request), paths)`, building only the projected fields."""
    if paths is None:
        return _cel_request(request)
    return {key: projection.project(_cel_request_field(request, key), below)
            for key, below in paths.items() if key in _CEL_REQUEST_KEYS}


def reasons_to_code(reason: str) -> int:
    """The HTTP status the API server uses for a VAP denial with this reason."""
    return {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413}.get(reason, 422)


__all__: Sequence[str] = ("PolicySet", "Outcome", "NamespaceRequired", "PolicyConfigError")
