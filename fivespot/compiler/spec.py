"""The config repo's kinds (`config.5spot.finos.org/v1alpha1`) as strict pydantic models.

A platform team writes these; the compiler turns them into cluster artifacts. Unknown fields are
errors (a typo must never be silently ignored), and every field says what it is for, because the
loader quotes these descriptions back when a value is wrong.
"""

from __future__ import annotations

import ipaddress
import re
from enum import StrEnum
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from fivespot.api.fieldpath import capacity_path_error, drained_path_error
from fivespot.api.kinds.machine_lifecycle import CAPI_GROUP
from fivespot.api.kinds.providers import (
    MAX_CALENDAR_DATES,
    MAX_SESSIONS,
    DateText,
    EarlyClose,
    LateOpen,
    SpecialSessions,
    TradingSession,
)
from fivespot.api.kinds.scheduled_capacity import (
    DNS_LABEL_PATTERN,
    DNS_SUBDOMAIN_PATTERN,
    KIND_PATTERN,
    VERSION_PATTERN,
)
from fivespot.api.providers import BuiltinProvider
from fivespot.commandline import docs
from fivespot.commandline.version import version
from fivespot.compiler.calendars import MAX_YEARS as MAX_CALENDAR_YEARS
from fivespot.compiler.specschema import SpecSchema
from fivespot.policies import kubeversions

CONFIG_GROUP: Final = "config.5spot.finos.org"
IMAGE_REPOSITORY: Final = "ghcr.io/finos/fivespot"
"""Where `make image` (image/build.py) names the image it builds."""


VERSION: Final = version()
DEFAULT_IMAGE: Final = f"{IMAGE_REPOSITORY}:{VERSION}"
CONFIG_API_VERSION: Final = f"{CONFIG_GROUP}/v1alpha1"

PLURAL_PATTERN: Final = r"^[a-z][a-z0-9]*$"
K8S_VERSION_PATTERN: Final = r"^1\.[0-9]+$"
MIN_CALENDAR_YEAR: Final = 1970
MAX_CALENDAR_YEAR: Final = 2200
"""exchange_calendars extrapolates any year, but pandas' nanosecond timestamps end in 2262."""

Name = Annotated[str, Field(pattern=DNS_LABEL_PATTERN, max_length=63)]
NamespaceName = Annotated[str, Field(pattern=DNS_LABEL_PATTERN, max_length=63)]
NodeName = Annotated[str, Field(pattern=DNS_SUBDOMAIN_PATTERN, max_length=253)]


def _capacity_path(path: str) -> str:
    if (error := capacity_path_error(path)) is not None:
        raise ValueError(error)
    return path


def _drained_path(path: str) -> str:
    if (error := drained_path_error(path)) is not None:
        raise ValueError(error)
    return path


CapacityPath = Annotated[str, AfterValidator(_capacity_path)]
DrainedPath = Annotated[str, AfterValidator(_drained_path)]


class _Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", populate_by_name=False, alias_generator=to_camel, frozen=True
    )


class Metadata(_Strict):
    name: Name = Field(description="Name of this spec, unique among specs of its kind.")
    labels: dict[str, str] = Field(default_factory=dict, description="Copied to nothing; for your own tooling.")
    annotations: dict[str, str] = Field(default_factory=dict, description="For your own tooling.")


# --- Platform -------------------------------------------------------------------------------


class Partition(_Strict):
    name: Name = Field(description="Partition name; one Lease-elected leader per partition.")
    namespaces: list[NamespaceName] = Field(
        default_factory=list,
        description="Namespaces in this partition. The partition named 'default' also takes "
        "every namespace no other partition lists.",
    )


class FailurePolicy(StrEnum):
    FAIL = "Fail"
    IGNORE = "Ignore"


class CertificateMode(StrEnum):
    SELF_MANAGED = "self-managed"
    CERT_MANAGER = "cert-manager"


class IssuerRef(_Strict):
    kind: Literal["Issuer", "ClusterIssuer"] = Field(description="cert-manager issuer kind.")
    name: Name = Field(description="cert-manager issuer name.")


class Certificate(_Strict):
    mode: CertificateMode = Field(
        default=CertificateMode.SELF_MANAGED,
        description="self-managed: the webhook keeps its CA and serving certificate in a Secret and "
        "injects the caBundle itself; cert-manager: a Certificate and the CA-injector annotation.",
    )
    issuer_ref: IssuerRef | None = Field(
        default=None, description="The cert-manager issuer; required when mode is cert-manager."
    )

    @model_validator(mode="after")
    def _issuer_for_cert_manager(self) -> "Certificate":
        if self.mode is CertificateMode.CERT_MANAGER and self.issuer_ref is None:
            raise ValueError("issuerRef is required when mode is cert-manager")
        return self


class HostGovernanceAction(StrEnum):
    DENY = "Deny"
    WARN = "Warn"


_LABEL_NAME: Final = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)"
LABEL_KEY_PATTERN: Final = rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_LABEL_NAME}$"
LABEL_VALUE_PATTERN: Final = rf"^{_LABEL_NAME}?$"


def _label_key(text: str) -> str:
    if len(text) > 317 or not re.fullmatch(LABEL_KEY_PATTERN, text):
        raise ValueError(f"{text!r} is not a label key: an optional DNS-name prefix and '/', then "
                         "1-63 letters, digits, '-', '_' or '.', starting and ending alphanumeric")
    return text


def _label_value(text: str) -> str:
    if not re.fullmatch(LABEL_VALUE_PATTERN, text):
        raise ValueError(f"{text!r} is not a label value: up to 63 letters, digits, '-', '_' or "
                         "'.', starting and ending alphanumeric")
    return text


LabelKey = Annotated[str, AfterValidator(_label_key)]
LabelValue = Annotated[str, AfterValidator(_label_value)]


class LabelSelectorRequirement(_Strict):
    key: LabelKey = Field(description="The label key.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(description="How to match.")
    values: list[LabelValue] = Field(default_factory=list, max_length=64,
                                     description="For In and NotIn (at least one); else none.")

    @model_validator(mode="after")
    def _values_fit_the_operator(self) -> "LabelSelectorRequirement":
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        return self


class LabelSelector(_Strict):
    match_labels: dict[LabelKey, LabelValue] = Field(default_factory=dict,
                                                     description="Labels that must all match.")
    match_expressions: list[LabelSelectorRequirement] = Field(
        default_factory=list, max_length=16, description="Requirements that must all hold.")


def _cidr(text: str) -> str:
    ipaddress.ip_network(text, strict=False)  # ValueError names what is wrong
    return text


Cidr = Annotated[str, Field(max_length=64), AfterValidator(_cidr)]


class IPBlock(_Strict):
    cidr: Cidr = Field(description="Sources in this range (e.g. 10.0.0.0/16).")
    except_: list[Cidr] = Field(default_factory=list, alias="except", max_length=16,
                                description="Ranges inside cidr that are not sources.")

    @model_validator(mode="after")
    def _exceptions_inside(self) -> "IPBlock":
        outer = ipaddress.ip_network(self.cidr, strict=False)
        for inner_text in self.except_:
            inner = ipaddress.ip_network(inner_text, strict=False)
            if inner.version != outer.version or not inner.subnet_of(outer) or inner == outer:  # type: ignore[arg-type]
                raise ValueError(f"except {inner_text} is not a range strictly inside {self.cidr}")
        return self


class NetworkPeer(_Strict):
    """A NetworkPolicy peer: an address range, or pods by namespace and/or pod labels."""

    ip_block: IPBlock | None = Field(default=None, description="Addresses (not with selectors).")
    namespace_selector: LabelSelector | None = Field(
        default=None, description="Pods in the namespaces with these labels ({}: every namespace).")
    pod_selector: LabelSelector | None = Field(
        default=None, description="Pods with these labels (in the install namespace unless "
        "namespaceSelector is set too).")

    @model_validator(mode="after")
    def _one_kind_of_peer(self) -> "NetworkPeer":
        selectors = self.namespace_selector is not None or self.pod_selector is not None
        if self.ip_block is not None and selectors:
            raise ValueError("ipBlock cannot be combined with namespaceSelector or podSelector; "
                             "list them as separate sources")
        if self.ip_block is None and not selectors:
            raise ValueError("name an ipBlock, a namespaceSelector or a podSelector")
        return self


def _every_pod() -> list[NetworkPeer]:
    return [NetworkPeer.model_validate({"namespaceSelector": {}})]


class WebhookNetworkPolicy(_Strict):
    enabled: StrictBool = Field(default=True, description="Emit the webhook's NetworkPolicy.")
    allowed_sources: list[NetworkPeer] = Field(
        default_factory=list, max_length=32,
        description="Who may connect to the webhook's serving port: the API server's addresses "
        "on your platform (for kind, EKS, GKE and OpenShift: "
        f"{docs.WHO_MAY_CALL_THE_WEBHOOK}). Empty (the default): nobody the "
        "CNI governs, so the webhook fails closed until you name them.")
    metrics_sources: list[NetworkPeer] = Field(
        default_factory=_every_pod, max_length=32,
        description="Who may scrape the webhook's metrics port (default: every pod).")


CONFIG_KEY_PATTERN: Final = r"^[-._a-zA-Z0-9]+$"
CLIENT_NAME_PATTERN: Final = r"^[A-Za-z0-9][-A-Za-z0-9._:@]*$"
"""A client certificate's common name or DNS SAN: no commas or spaces (the webhook's
--client-subject-names is a comma-separated list)."""


class CARef(_Strict):
    name: Name = Field(description="Its name, in the install namespace.")
    key: str = Field(default="ca.crt", max_length=253, pattern=CONFIG_KEY_PATTERN,
                     description="The key holding the CA certificate(s), PEM.")


class WebhookClientAuthentication(_Strict):
    ca_config_map: CARef | None = Field(
        default=None, description="A ConfigMap holding the CA that signs the API server's client "
        "certificate for webhooks (the one its AdmissionConfiguration kubeConfigFile presents).")
    ca_secret: CARef | None = Field(
        default=None, description="The same CA, from a Secret instead of a ConfigMap.")
    allowed_names: list[Annotated[str, Field(max_length=253, pattern=CLIENT_NAME_PATTERN)]] = Field(
        min_length=1, max_length=16,
        description="The names a caller's certificate must carry one of (its subject common name "
        "or a DNS SAN), e.g. the API server's kube-apiserver-webhook-client: a CA that signs "
        "other clients too then admits only these.")

    @model_validator(mode="after")
    def _one_ca(self) -> "WebhookClientAuthentication":
        if (self.ca_config_map is None) == (self.ca_secret is None):
            raise ValueError("name the client CA once: caConfigMap or caSecret")
        return self


class WebhookSettings(_Strict):
    failure_policy: FailurePolicy = Field(
        default=FailurePolicy.FAIL,
        description="What the API server does when the host-governance, field-governance and "
        "polyfill webhooks cannot be reached. Roll out with Ignore, then switch to Fail. The "
        "target guard always fails closed (Fail): its match condition sends it only the capacity "
        "controller's writes, so that cannot block anyone else, and failing open would leave "
        "those writes with RBAC as their only lock.",
    )
    min_tls_version: Literal["1.2", "1.3"] = Field(
        default="1.3", alias="minTLSVersion", description="Oldest TLS version the webhook "
        "accepts: 1.3 (every supported API server speaks it), or 1.2, which is then offered with "
        "AEAD suites only (ECDHE+AESGCM:ECDHE+CHACHA20) and without renegotiation.")
    client_authentication: WebhookClientAuthentication | None = Field(
        default=None, description="Serve only callers presenting a client certificate from this CA "
        "with one of these names (mutual TLS); the API server must be configured to present one "
        f"({docs.WEBHOOK_CLIENT_AUTHENTICATION}). Off by default: managed control planes "
        "cannot present one, and the NetworkPolicy decides who may connect.")
    timeout_seconds: StrictInt = Field(default=5, ge=1, le=30, description="Per-request timeout, 1-30.")
    certificate: Certificate = Field(default_factory=Certificate, description="Serving certificate.")
    host_governance: HostGovernanceAction = Field(
        default=HostGovernanceAction.DENY,
        description="Deny or Warn when a ScheduledCapacity names a node a ScheduledMachine governs.",
    )
    replicas: StrictInt = Field(default=2, ge=1, le=10, description="Webhook replicas.")
    network_policy: WebhookNetworkPolicy = Field(
        default_factory=WebhookNetworkPolicy,
        description="The NetworkPolicy limiting who may connect to the webhook.")


class Enforcement(StrEnum):
    VAP = "vap"
    WEBHOOK = "webhook"
    BOTH = "both"


class ArgoCD(_Strict):
    repo_url: str = Field(alias="repoURL", max_length=2048, description="Git repository Argo CD syncs from.")
    path: str = Field(max_length=1024, description="Path of the compiled output in that repository.")
    target_revision: str = Field(default="HEAD", max_length=255, description="Branch, tag or commit.")
    project: str = Field(default="default", max_length=253, description="Argo CD project.")
    namespace: NamespaceName = Field(default="argocd", description="Namespace Argo CD runs in.")
    destination_server: str = Field(
        default="https://kubernetes.default.svc", max_length=2048, description="Target cluster."
    )
    fixed_self_heal_timeout: StrictBool = Field(
        default=True,
        description="Emit argocd/argocd-cmd-params-cm.yaml: Argo CD's application-controller "
        "self-heals no sooner than 5 s after an Application's last operation, every 5 s, instead "
        "of its exponential backoff, whose first attempt waits for nothing. Without it a tenant's "
        "Application with selfHeal may re-apply the commit it has just synced, git's value of a "
        "gated field included. Applies to every Application; takes effect once the "
        "application-controller restarts (decision record 0038). false: no such file.")


class FluxSourceRef(_Strict):
    kind: Literal["GitRepository", "OCIRepository", "Bucket"] = Field(
        default="GitRepository", description="Flux source kind."
    )
    name: Name = Field(description="Flux source name.")
    namespace: NamespaceName = Field(default="flux-system", description="Flux source namespace.")


class Flux(_Strict):
    source_ref: FluxSourceRef = Field(description="The Flux source holding the compiled output.")
    path: str = Field(max_length=1024, description="Path of the compiled output in that source.")
    interval: str = Field(default="10m", pattern=r"^([0-9]+(h|m|s))+$", description="Reconcile interval.")
    namespace: NamespaceName = Field(default="flux-system", description="Namespace of the Kustomizations.")
    url: str | None = Field(
        default=None, max_length=2048, pattern=r"^(https?|ssh|oci)://",
        description="Emit the source too (a GitRepository or OCIRepository named by sourceRef) "
        "at this URL; leave unset when the source already exists (e.g. flux-system).")
    ref: str = Field(default="main", min_length=1, max_length=255,
                     description="The branch (GitRepository) or tag (OCIRepository) of that source.")

    @model_validator(mode="after")
    def _source_can_be_emitted(self) -> "Flux":
        if self.url is None:
            return self
        if self.source_ref.kind == "Bucket":
            raise ValueError("url: a Bucket source cannot be emitted (it needs an endpoint and "
                             "credentials); create it yourself and leave url unset")
        oci = self.url.startswith("oci://")
        if oci != (self.source_ref.kind == "OCIRepository"):
            raise ValueError(f"url: {self.url!r} does not fit sourceRef.kind "
                             f"{self.source_ref.kind} (oci:// is for OCIRepository only)")
        return self


class GitOps(_Strict):
    argocd: ArgoCD | None = Field(default=None, description="Emit Argo CD Applications.")
    flux: Flux | None = Field(default=None, description="Emit Flux Kustomizations.")


class Monitoring(_Strict):
    """Prometheus Operator objects for the components (needs its CRDs in the cluster)."""

    enabled: StrictBool = Field(
        default=False,
        description="Emit a ServiceMonitor per component and a PrometheusRule with fivespot's "
        "alerts (monitoring/ layer; the Prometheus Operator's CRDs must be installed).",
    )
    labels: dict[str, str] = Field(
        default_factory=dict, max_length=16,
        description="Labels added to the ServiceMonitors and the PrometheusRule, so your "
        "Prometheus's serviceMonitorSelector and ruleSelector pick them (e.g. release: prometheus).",
    )
    interval: str = Field(default="30s", pattern=r"^([0-9]+(ms|s|m|h))+$",
                          description="Scrape interval of each component's /metrics.")


class PlatformSpec(_Strict):
    namespace: NamespaceName = Field(default="5spot-system", description="Install namespace.")
    image: str = Field(default=DEFAULT_IMAGE, max_length=512, min_length=1,
                       description="The fivespot image all components run (default: the image "
                       "`make image` builds for this version; push it to your registry and name it here).")
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        default="IfNotPresent", description="Pull policy of that image."
    )
    controller_replicas: StrictInt = Field(default=2, ge=1, le=10, description="Replicas per controller.")
    partitions: list[Partition] = Field(
        default_factory=lambda: [Partition(name="default")],
        max_length=64,
        description="Named sets of namespaces, each reconciled by one Lease-elected leader.",
    )
    webhook: WebhookSettings = Field(default_factory=WebhookSettings, description="Admission webhook.")
    enforcement: Enforcement = Field(
        default=Enforcement.VAP,
        description="vap: ValidatingAdmissionPolicies; webhook: the webhook evaluates the same "
        "policies (for clusters without VAP); both.",
    )
    gitops: GitOps = Field(default_factory=GitOps, description="GitOps targets.")
    min_kubernetes_version: str = Field(
        default=kubeversions.OLDEST.minor, pattern=K8S_VERSION_PATTERN,
        description="Oldest Kubernetes minor the output must install on: CEL rule costs are "
        "estimated as that API server estimates them, and only CEL functions every targeted "
        f"version offers may be used (fivespot supports {kubeversions.SUPPORTED_RANGE}; an older "
        "minimum is targeted as the oldest supported, with a warning).",
    )
    max_kubernetes_version: str | None = Field(
        default=None, pattern=K8S_VERSION_PATTERN,
        description="Newest Kubernetes minor the output must install on (default: the newest "
        f"supported, {kubeversions.NEWEST.minor}); `fivespot check` decides as this version "
        "unless told another.",
    )
    monitoring: Monitoring = Field(default_factory=Monitoring,
                                   description="ServiceMonitors and alerts for Prometheus.")
    install_scheduled_machine_crd: StrictBool = Field(
        default=True,
        description="Install the ScheduledMachine CRD (turn off where 5-Spot itself installs it).",
    )

    @model_validator(mode="after")
    def _partitions_are_disjoint(self) -> "PlatformSpec":
        seen: dict[str, str] = {}
        names: set[str] = set()
        for partition in self.partitions:
            if partition.name in names:
                raise ValueError(f"partition {partition.name!r} is declared twice")
            names.add(partition.name)
            for namespace in partition.namespaces:
                if namespace in seen:
                    raise ValueError(
                        f"namespace {namespace!r} is in partitions {seen[namespace]!r} and "
                        f"{partition.name!r}; a namespace belongs to one partition"
                    )
                seen[namespace] = partition.name
        if self.enforcement is not Enforcement.WEBHOOK and not self.serves_vaps:
            raise ValueError(
                "enforcement 'vap' needs ValidatingAdmissionPolicy v1 (Kubernetes 1.30); use "
                "enforcement 'webhook' for older clusters"
            )
        newest = self.max_kubernetes_version
        if newest is not None:
            if kubeversions.minor_number(newest) > kubeversions.NEWEST.number:
                raise ValueError(
                    f"maxKubernetesVersion {newest} is newer than fivespot supports "
                    f"({kubeversions.SUPPORTED_RANGE}): its API server is not known yet")
            if kubeversions.minor_number(newest) < kubeversions.OLDEST.number:
                raise ValueError(
                    f"maxKubernetesVersion {newest} is older than fivespot supports "
                    f"({kubeversions.SUPPORTED_RANGE})")
            if kubeversions.minor_number(newest) < self.min_minor:
                raise ValueError(
                    f"maxKubernetesVersion {newest} is older than minKubernetesVersion "
                    f"{self.min_kubernetes_version}")
        elif self.min_minor > kubeversions.NEWEST.number:
            raise ValueError(
                f"minKubernetesVersion {self.min_kubernetes_version} is newer than fivespot "
                f"supports ({kubeversions.SUPPORTED_RANGE}): its API server is not known yet")
        return self

    @property
    def serves_vaps(self) -> bool:
        """Every targeted cluster serves ValidatingAdmissionPolicy v1 (Kubernetes 1.30)."""
        return self.min_minor >= (1, 30)

    @property
    def min_minor(self) -> kubeversions.Minor:
        """minKubernetesVersion as numbers, `(1, 30)`."""
        return kubeversions.minor_number(self.min_kubernetes_version)

    def kubernetes_versions(self) -> tuple[kubeversions.KubernetesVersion, ...]:
        """The supported versions the output targets, oldest first: minKubernetesVersion (at
        least the oldest supported) to maxKubernetesVersion (default: the newest supported)."""
        newest = self.max_kubernetes_version
        return kubeversions.in_range(
            max(self.min_minor, kubeversions.OLDEST.number),
            kubeversions.NEWEST.number if newest is None else kubeversions.minor_number(newest))


# --- CapacityConsumer ------------------------------------------------------------------------

KUBERNETES_GROUP_SUFFIXES: Final = ("k8s.io", "kubernetes.io")
"""The Kubernetes project's own API groups (`*.k8s.io`, `*.kubernetes.io`: a CRD may only join
them with the project's approval, KEP-1111): admission, RBAC, CRDs, API services, certificates,
authentication, authorization, leases, flow control, storage, networking, ... A consumer there
would give the capacity controller `patch` on cluster machinery a target guard cannot fully cover
(webhook configurations are never sent to webhooks). The workload groups a team gates (`apps`,
`batch`, `autoscaling`, `policy`) carry no suffix and stay allowed, as does every other group."""
FIVESPOT_GROUP: Final = "5spot.finos.org"
"""fivespot's own groups (ScheduledCapacity, providers, tenant limits): the gate does not gate
itself."""


def refused_consumer_group(group: str) -> str | None:
    """Why a consumer may not be of `group`, or None."""
    def within(suffix: str) -> bool:
        return group == suffix or group.endswith(f".{suffix}")

    if any(within(suffix) for suffix in KUBERNETES_GROUP_SUFFIXES):
        return (f"{group} is one of the Kubernetes project's own API groups (every *.k8s.io and "
                "*.kubernetes.io group: admission, RBAC, CRDs, certificates, leases, ...), which "
                "fivespot does not gate: its capacity controller would be given patch on them. "
                "Gate a workload kind: apps, batch, autoscaling, policy, or your own CRD's group")
    if within(FIVESPOT_GROUP):
        return (f"{group} is fivespot's own API group, which fivespot does not gate: its capacity "
                "controller would be given patch on fivespot's own objects")
    return None



class CapacityConsumerSpec(_Strict):
    group: str = Field(pattern=DNS_SUBDOMAIN_PATTERN, max_length=253, description="API group of the target kind.")
    version: str = Field(pattern=VERSION_PATTERN, max_length=63, description="A served version of it.")
    kind: str = Field(pattern=KIND_PATTERN, max_length=63, description="Kind of the target.")
    resource: str = Field(pattern=PLURAL_PATTERN, max_length=63, description="Plural resource name.")
    capacity_paths: list[CapacityPath] = Field(
        min_length=1, max_length=8,
        description="The fields a ScheduledCapacity may gate on this kind (e.g. spec.warmReplicas).",
    )
    drained_path: DrainedPath | None = Field(
        default=None, description="The in-use counter (e.g. status.inUse) a "
        "ScheduledCapacity's spec.handback.drainedPath may name: its handback then waits until it "
        "reads 0."
    )
    max_active_value: StrictInt = Field(ge=1, le=2**31 - 1, description="Largest value any tenant may write.")

    @field_validator("group")
    @classmethod
    def _group_may_be_gated(cls, group: str) -> str:
        refused = refused_consumer_group(group)
        if refused is not None:
            raise ValueError(refused)
        return group

    @field_validator("capacity_paths")
    @classmethod
    def _paths_are_unique(cls, paths: list[str]) -> list[str]:
        if len(set(paths)) != len(paths):
            raise ValueError("capacity paths must be unique")
        return paths

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


# --- ScheduleProvider ------------------------------------------------------------------------


class ProviderCRD(StrEnum):
    """Who installs a custom provider kind's CRD."""

    COMPILED = "compiled"
    """fivespot compiles it from specSchema and installs it with the rest of the output, with a
    ServiceAccount and least-privilege RBAC for the team's provider Deployment."""
    EXTERNAL = "external"
    """The team installs the CRD, its RBAC and its controller itself (the provider guide's steps
    1-4); fivespot only lets its consumers read the kind."""


class CustomProvider(_Strict):
    kind: str = Field(pattern=KIND_PATTERN, max_length=63, description="Kind of the provider CRD.")
    plural: str | None = Field(default=None, pattern=PLURAL_PATTERN, max_length=63,
                               description="Plural; defaults to the lower-cased kind + 's'.")
    short_names: list[str] = Field(default_factory=list, max_length=4,
                                   description="kubectl short names.")
    version: str = Field(default="v1alpha1", pattern=VERSION_PATTERN, description="Served version.")
    description: str = Field(default="", max_length=1024, description="What the schedule means.")
    crd: ProviderCRD = Field(
        default=ProviderCRD.COMPILED,
        description="compiled: fivespot compiles the CRD from specSchema and installs it, with a "
        "ServiceAccount and RBAC for your provider's Deployment. external: you install the CRD, "
        "its RBAC and its controller yourself (as the provider guide does); fivespot only lets "
        "its consumers read the kind.",
    )
    spec_schema: SpecSchema | None = Field(
        default=None,
        description="OpenAPI v3 schema of the provider's spec (type: object, properties...); "
        "required with crd: compiled, refused with crd: external.",
    )

    @field_validator("short_names")
    @classmethod
    def _short_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not name.isalnum() or not name.islower():
                raise ValueError(f"short name {name!r} must be lower-case letters and digits")
        return names

    @field_validator("spec_schema")
    @classmethod
    def _object_schema(cls, schema: SpecSchema | None) -> SpecSchema | None:
        if schema is not None and schema.type != "object":
            raise ValueError("specSchema must have type: object")
        return schema

    @model_validator(mode="after")
    def _schema_matches_crd(self) -> "CustomProvider":
        if self.crd is ProviderCRD.COMPILED and self.spec_schema is None:
            raise ValueError("specSchema is required: fivespot compiles this kind's CRD from it "
                             "(or set crd: external if you install the CRD yourself)")
        if self.crd is ProviderCRD.EXTERNAL and self.spec_schema is not None:
            raise ValueError("specSchema is not used with crd: external (you install the CRD, "
                             "so its schema is yours); remove it, or set crd: compiled")
        return self

    @property
    def compiled(self) -> bool:
        """Whether fivespot installs this kind's CRD (and an identity for its provider)."""
        return self.crd is ProviderCRD.COMPILED

    @property
    def plural_name(self) -> str:
        return self.plural or self.kind.lower() + "s"


class CalendarYears(_Strict):
    first: StrictInt = Field(ge=MIN_CALENDAR_YEAR, le=MAX_CALENDAR_YEAR,
                       description="First calendar year expanded (from 1 January, local).")
    last: StrictInt = Field(ge=MIN_CALENDAR_YEAR, le=MAX_CALENDAR_YEAR,
                      description="Last calendar year expanded (through 31 December, local).")

    @model_validator(mode="after")
    def _span(self) -> "CalendarYears":
        if self.last < self.first:
            raise ValueError(f"last ({self.last}) is before first ({self.first})")
        if self.last - self.first >= MAX_CALENDAR_YEARS:
            raise ValueError(f"{self.first}..{self.last} spans more than {MAX_CALENDAR_YEARS} "
                             "years; cover fewer years and extend the range as they pass")
        return self


class ExchangeCalendarSpec(_Strict):
    """An exchange's trading calendar, expanded by the compiler into one CapitalMarketsSchedule
    per namespace, so the holidays and early closes the controller follows are the ones
    reviewed in the pull request (not whatever a library says at run time)."""

    name: Name = Field(description="Name of the CapitalMarketsSchedule object in each namespace.")
    namespaces: list[NamespaceName] = Field(
        min_length=1, max_length=256,
        description="Namespaces that get the schedule (ScheduledCapacity references it there).",
    )
    exchange: str = Field(
        min_length=1, max_length=32,
        description="exchange_calendars code of the exchange, an ISO 10383 MIC such as XNYS.",
    )
    years: CalendarYears = Field(description="The calendar years to expand, inclusive.")
    sessions: list[TradingSession] | None = Field(
        default=None, max_length=MAX_SESSIONS,
        description="Replace the exchange's regular sessions (say, only 09:30-10:30); its "
        "holidays and early closes still apply.",
    )
    holidays: list[DateText] = Field(
        default_factory=list, max_length=MAX_CALENDAR_DATES,
        description="Extra closed dates, added to the exchange's holidays.",
    )
    early_closes: list[EarlyClose] = Field(
        default_factory=list, max_length=MAX_CALENDAR_DATES,
        description="Extra or replacement early closes (a hand-written date wins).",
    )
    late_opens: list[LateOpen] = Field(
        default_factory=list, max_length=MAX_CALENDAR_DATES,
        description="Extra or replacement late opens (a hand-written date wins).",
    )
    special_sessions: list[SpecialSessions] = Field(
        default_factory=list, max_length=MAX_CALENDAR_DATES,
        description="Extra or replacement dates trading their own sessions (a hand-written "
        "date wins).",
    )

    @field_validator("namespaces")
    @classmethod
    def _namespaces_once(cls, namespaces: list[str]) -> list[str]:
        if len(set(namespaces)) != len(namespaces):
            raise ValueError("namespaces must be unique")
        return namespaces

    def overrides(self) -> dict[str, Any]:
        """The hand-written CapitalMarketsSchedule fields (camelCase) layered on the exchange."""
        fields: dict[str, Any] = {}
        if self.sessions is not None:
            fields["sessions"] = [s.model_dump(mode="json", by_alias=True, exclude_none=True)
                                  for s in self.sessions]
        if self.holidays:
            fields["holidays"] = list(self.holidays)
        if self.early_closes:
            fields["earlyCloses"] = [e.model_dump(mode="json", by_alias=True, exclude_none=True)
                                     for e in self.early_closes]
        if self.late_opens:
            fields["lateOpens"] = [e.model_dump(mode="json", by_alias=True) for e in self.late_opens]
        if self.special_sessions:
            fields["specialSessions"] = [
                e.model_dump(mode="json", by_alias=True, exclude_none=True)
                for e in self.special_sessions]
        return fields


class ScheduleProviderSpec(_Strict):
    builtin: list[BuiltinProvider] = Field(
        default_factory=list, description="Built-in providers to install, by kind."
    )
    custom: list[CustomProvider] = Field(
        default_factory=list, max_length=32, description="Your own provider kinds."
    )
    calendars: list[ExchangeCalendarSpec] = Field(
        default_factory=list, max_length=64,
        description="Exchange calendars compiled into CapitalMarketsSchedule objects "
        "(needs CapitalMarketsSchedule in builtin and the calendars extra).",
    )


# --- MachineProvisioning --------------------------------------------------------------------




class CapiCluster(_Strict):
    namespace: NamespaceName = Field(
        description="The namespace of the CAPI Cluster; ScheduledMachines naming it live here.")
    name: Name = Field(description="The Cluster's name; its kubeconfig is the Secret "
                       "<name>-kubeconfig in the same namespace (CAPI's convention).")


class EmbeddableKind(_Strict):
    group: str = Field(pattern=DNS_SUBDOMAIN_PATTERN, max_length=253,
                       description="API group, e.g. bootstrap.cluster.x-k8s.io.")
    version: str = Field(pattern=VERSION_PATTERN, max_length=63,
                         description="A served version, e.g. v1beta2.")
    kind: str = Field(pattern=KIND_PATTERN, max_length=63, description="Kind, e.g. KubeadmConfig.")
    resource: str = Field(pattern=PLURAL_PATTERN, max_length=63,
                          description="Plural resource name, e.g. kubeadmconfigs.")


def _unique_kinds(kinds: list[EmbeddableKind]) -> list[EmbeddableKind]:
    seen: set[tuple[str, str]] = set()
    for kind in kinds:
        if (kind.group, kind.kind) in seen:
            raise ValueError(f"{kind.kind}.{kind.group} is listed twice")
        seen.add((kind.group, kind.kind))
    return kinds


class MachineProvisioningSpec(_Strict):
    """Which CAPI clusters ScheduledMachines may join and which objects they may embed. Its
    presence installs fivespot's machine controller, its identity and the full ScheduledMachine
    CRD."""

    clusters: list[CapiCluster] = Field(
        min_length=1, max_length=256,
        description="The CAPI Clusters machines may join; their namespaces are the only ones "
        "where the machine controller may create Machines.")
    bootstrap: list[EmbeddableKind] = Field(
        min_length=1, max_length=16,
        description="Bootstrap kinds a ScheduledMachine's bootstrapSpec may be.")
    infrastructure: list[EmbeddableKind] = Field(
        min_length=1, max_length=16,
        description="Infrastructure kinds a ScheduledMachine's infrastructureSpec may be.")
    machine_version: str = Field(
        default="v1beta2", pattern=VERSION_PATTERN, max_length=63,
        description=f"The served version of {CAPI_GROUP} Machines to create.")

    @field_validator("clusters")
    @classmethod
    def _clusters_once(cls, clusters: list[CapiCluster]) -> list[CapiCluster]:
        seen = set()
        for cluster in clusters:
            if (cluster.namespace, cluster.name) in seen:
                raise ValueError(f"cluster {cluster.namespace}/{cluster.name} is listed twice")
            seen.add((cluster.namespace, cluster.name))
        return clusters

    @field_validator("bootstrap", "infrastructure")
    @classmethod
    def _kinds_once(cls, kinds: list[EmbeddableKind]) -> list[EmbeddableKind]:
        return _unique_kinds(kinds)

    @property
    def namespaces(self) -> tuple[str, ...]:
        return tuple(sorted({c.namespace for c in self.clusters}))


# --- TenantPolicy ----------------------------------------------------------------------------


class ValidationAction(StrEnum):
    DENY = "Deny"
    WARN = "Warn"
    AUDIT = "Audit"


RESERVED_NAMESPACES: Final = ("kube-node-lease", "kube-public", "kube-system")
"""Kubernetes' own namespaces: never a tenant's (the webhook does not decide in kube-system, and a
tenant there would give the capacity controller patch on the cluster's own workloads). The
install namespace is refused too (`fivespot.compiler.repo`)."""


class TenantPolicySpec(_Strict):
    namespaces: list[NamespaceName] = Field(
        min_length=1, max_length=256, description="Tenant namespaces this policy covers."
    )
    consumers: list[Name] = Field(
        min_length=1, max_length=64, description="CapacityConsumer names these tenants may target."
    )
    max_active_value: StrictInt = Field(ge=0, le=2**31 - 1, description="Largest activeValue allowed.")
    allowed_nodes: list[NodeName] = Field(
        default_factory=list, max_length=256,
        description="Nodes spec.nodeName may name; empty allows any.",
    )
    validation_actions: list[ValidationAction] = Field(
        default_factory=lambda: [ValidationAction.DENY], min_length=1,
        description="Deny, Warn and/or Audit (Deny and Warn together are not allowed).",
    )

    @field_validator("validation_actions")
    @classmethod
    def _actions(cls, actions: list[ValidationAction]) -> list[ValidationAction]:
        if ValidationAction.DENY in actions and ValidationAction.WARN in actions:
            raise ValueError("Deny and Warn cannot be combined (the API server rejects it)")
        if len(set(actions)) != len(actions):
            raise ValueError("validation actions must be unique")
        return actions


# --- Fixture ---------------------------------------------------------------------------------


class ExpectedViolation(_Strict):
    policy: str | None = Field(default=None, max_length=253, description="Policy or rule name.")
    field: str | None = Field(default=None, max_length=512, description="Denied field path.")
    message: str | None = Field(default=None, max_length=1024, description="Text the message contains.")


class Expectation(_Strict):
    allowed: StrictBool = Field(description="Whether admission allows the object.")
    violations: list[ExpectedViolation] = Field(default_factory=list, description="Expected denials.")
    warnings: list[str] = Field(default_factory=list, description="Texts the warnings contain.")
    message: str | None = Field(default=None, description="The API server's whole message for the "
                                "denial (what kubectl prints after `error when creating \"FILE\": `), "
                                "byte for byte.")


class PolicyRule(_Strict):
    """One rule of an RBAC Role, as the Role would say it."""

    verbs: list[Annotated[str, Field(max_length=63)]] = Field(
        min_length=1, max_length=32, description="Verbs, e.g. patch, create; * for all.")
    api_groups: list[Annotated[str, Field(max_length=253)]] = Field(
        default_factory=list, max_length=32,
        description="API groups ('' for the core group, * for all).")
    resources: list[Annotated[str, Field(max_length=127)]] = Field(
        default_factory=list, max_length=32,
        description="Resources (plural, or resource/subresource; * for all).")
    resource_names: list[Annotated[str, Field(max_length=253)]] = Field(
        default_factory=list, max_length=64,
        description="Object names the rule is limited to (empty: any).")


class FixtureSpec(_Strict):
    operation: Literal["CREATE", "UPDATE"] = Field(default="CREATE", description="Admission operation.")
    object: dict[str, Any] = Field(description="The object under admission.")
    old_object: dict[str, Any] | None = Field(default=None, description="Previous object, for UPDATE.")
    expect: Expectation = Field(description="The verdict the API server must give.")
    field_validation: Literal["Strict", "Warn", "Ignore"] = Field(
        default="Strict", description="The request's fieldValidation: Strict (kubectl's default) "
        "denies unknown and duplicate fields, Warn (`kubectl --validate=warn`) warns, Ignore "
        "(`--validate=false`) drops them silently.")
    user_rules: list[PolicyRule] | None = Field(
        default=None, max_length=64,
        description="The requesting user's RBAC in the object's namespace, as the rules of the "
        "Roles bound to them: the policies' authorizer checks (may the author patch the "
        "target?) are decided by these alone. Omitted: those checks are assumed allowed, since "
        "nothing offline knows the user's RBAC; [] states that the user holds no rights.")

    @model_validator(mode="after")
    def _update_has_old(self) -> "FixtureSpec":
        if self.operation == "UPDATE" and self.old_object is None:
            raise ValueError("an UPDATE fixture needs oldObject")
        if self.operation == "CREATE" and self.old_object is not None:
            raise ValueError("oldObject is only for operation UPDATE")
        return self


# --- Documents -------------------------------------------------------------------------------


class _Document(_Strict):
    api_version: Literal["config.5spot.finos.org/v1alpha1"] = Field(description="Config API version.")
    metadata: Metadata = Field(description="Name and labels.")


class Platform(_Document):
    kind: Literal["Platform"]
    spec: PlatformSpec


class CapacityConsumer(_Document):
    kind: Literal["CapacityConsumer"]
    spec: CapacityConsumerSpec


class ScheduleProvider(_Document):
    kind: Literal["ScheduleProvider"]
    spec: ScheduleProviderSpec


class TenantPolicy(_Document):
    kind: Literal["TenantPolicy"]
    spec: TenantPolicySpec


class MachineProvisioning(_Document):
    kind: Literal["MachineProvisioning"]
    spec: MachineProvisioningSpec


class Fixture(_Document):
    kind: Literal["Fixture"]
    spec: FixtureSpec


DOCUMENT_KINDS: Final[dict[str, type[_Document]]] = {
    "Platform": Platform,
    "CapacityConsumer": CapacityConsumer,
    "ScheduleProvider": ScheduleProvider,
    "TenantPolicy": TenantPolicy,
    "MachineProvisioning": MachineProvisioning,
    "Fixture": Fixture,
}
