"""Monitoring a user can deploy: a ServiceMonitor per component and one PrometheusRule of alerts.

Emitted only when `Platform.spec.monitoring.enabled` (the Prometheus Operator's CRDs must be in
the cluster). Each ServiceMonitor scrapes the component's metrics Service (`<component>-metrics`,
port `metrics`, /metrics) that the workloads emitter already creates, so Prometheus's `job` label
is that Service's name. Each alert is a named constant below with the PromQL it fires on, a
summary and a runbook: a page of the docs site per alert (docs/operations/alerts/); the suite validates the objects against
the upstream CRDs on the real API server and checks every metric an expression names against
what the running processes export.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from fivespot.commandline import docs
from fivespot.compiler.emit.base import MONITORING, Artifact, metadata
from fivespot.compiler.emit.components import components
from fivespot.compiler.emit.workloads import METRICS_PORT_NAME, selector
from fivespot.compiler.repo import Repo

MONITORING_API: Final = "monitoring.coreos.com/v1"
RULE_NAME: Final = "fivespot-alerts"
RUNBOOK: Final = docs.page("operations/alerts/")
"""Each alert's runbook is a page of the docs site: docs/operations/alerts/<alert, lowercase>.md."""


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str
    job: str | None = None
    """The job a per-component alert is about (absent() cannot carry it from its expression)."""

    @property
    def runbook_url(self) -> str:
        return f"{RUNBOOK}{self.name.lower()}.html"


def _up(job: str) -> str:
    return f'up{{job="{job}"}} == 1'


HANDBACK_TIMED_OUT: Final = Alert(
    "FivespotHandbackTimedOut",
    "sum by (namespace, job) (increase(fivespot_handback_timeouts_total[15m])) > 0",
    "0m", "warning",
    "A ScheduledCapacity's handback timed out: its target still reports capacity in use",
    "{{ $value }} handbacks reached their timeout undrained in the last 15 minutes "
    "(job {{ $labels.job }}); the value is held at 0 and nothing escalates. Find them with "
    "`kubectl get scap -A | grep HandbackTimedOut`.")

HOST_GOVERNANCE_CONFLICT: Final = Alert(
    "FivespotHostGovernanceConflict",
    "sum by (namespace, job) (increase(fivespot_host_governance_conflicts_total[15m])) > 0",
    "0m", "warning",
    "A ScheduledCapacity names a node a ScheduledMachine governs",
    "{{ $value }} ScheduledCapacities entered HostGovernanceConflict in the last 15 minutes; "
    "their value is driven to 0 until the conflict is resolved.")

FIELD_GOVERNANCE_CONFLICT: Final = Alert(
    "FivespotFieldGovernanceConflict",
    'sum by (namespace, job) (fivespot_governance_conflicted_objects{rule="field"}) > 0',
    "0m", "warning",
    "A ScheduledCapacity names a field an older one already governs, and writes nothing",
    "{{ $value }} ScheduledCapacities are yielding their field to an older ScheduledCapacity "
    "naming the same target and path (FieldGovernanceConflict=True, phase Error): they follow "
    "no schedule until the conflict is resolved. Find them with "
    "`kubectl get scap -A | grep FieldGovernedByOlderScheduledCapacity`.")

WATCH_STALLED: Final = Alert(
    "FivespotWatchStalled",
    "min by (namespace, job, pod, resource) (fivespot_watch_healthy) < 1",
    "5m", "critical",
    "A fivespot watch is stalled or not synced: the process acts on stale data",
    "The watch of {{ $labels.resource }} in pod {{ $labels.pod }} has shown no event or bookmark "
    "for longer than its stall threshold, or never synced; the pod is not ready.")

CERTIFICATE_EXPIRES_SOON: Final = Alert(
    "FivespotWebhookCertificateExpiresSoon",
    "min by (namespace, pod) (fivespot_webhook_certificate_expiry_timestamp_seconds) - time() "
    "< 21 * 24 * 3600",
    "1h", "warning",
    "The webhook's certificate expires in less than 21 days and has not been renewed",
    "Certificates renew at 2/3 of their lifetime (30 days before a 90-day serving certificate "
    "expires); one this close to expiry means renewal failed. When it expires, the API server "
    "refuses every guarded write (failurePolicy Fail).")

RECONCILE_ERRORS: Final = Alert(
    "FivespotReconcileErrors",
    "sum by (namespace, job, controller) (rate(fivespot_reconcile_errors_total[10m])) > 0",
    "15m", "warning",
    "A fivespot controller keeps failing reconciles",
    "{{ $labels.controller }} has failed reconciles for 15 minutes ({{ $value }} per second); "
    "its log says which objects and why.")

NO_LEADER: Final = Alert(
    "FivespotPartitionWithoutLeader",
    "max by (namespace, job, controller, partition) (fivespot_is_leader) < 1",
    "2m", "critical",
    "No replica leads a partition: its namespaces are not reconciled",
    "No replica of {{ $labels.controller }} has led partition {{ $labels.partition }} for 2 "
    "minutes (a lease that cannot be renewed, or RBAC on Leases).")


OUT_OF_POLICY: Final = Alert(
    "FivespotObjectsOutOfPolicy",
    "sum by (namespace) (fivespot_objects_out_of_policy) > 0",
    "15m", "warning",
    "ScheduledCapacities that the admission policies in force now deny",
    "{{ $value }} ScheduledCapacities in namespace {{ $labels.namespace }} break a TenantPolicy "
    "tightened after they were stored; each is held at 0 (Stalled=True/OutOfPolicy). They are "
    "listed in `kubectl -n {{ $labels.namespace }} get policyreport fivespot-scheduledcapacities "
    "-o yaml` and by `fivespot audit OUT_DIR`.")


def _component_down(job: str) -> Alert:
    return Alert(
        "FivespotComponentDown", f"absent({_up(job)})", "5m", "critical",
        f"No replica of {job.removesuffix('-metrics')} is up",
        "No replica has been scraped successfully for 5 minutes: pods not running, not ready, "
        "or the metrics port unreachable.", job=job)


FIXED_ALERTS: Final = (HANDBACK_TIMED_OUT, HOST_GOVERNANCE_CONFLICT, FIELD_GOVERNANCE_CONFLICT,
                       WATCH_STALLED, CERTIFICATE_EXPIRES_SOON, RECONCILE_ERRORS, NO_LEADER,
                       OUT_OF_POLICY)


EVERY_ALERT: Final = (*FIXED_ALERTS, _component_down("<component>-metrics"))
"""Every alert as the docs show it: the fixed ones, then the one each component gets."""


def alerts(repo: Repo) -> list[Alert]:
    """Every alert for this repo's components: the fixed ones, one 'down' alert per component."""
    found = list(FIXED_ALERTS)
    if not repo.has_webhook:
        found.remove(CERTIFICATE_EXPIRES_SOON)
    if not repo.has_capacity:
        found = [a for a in found
                 if a not in (HANDBACK_TIMED_OUT, HOST_GOVERNANCE_CONFLICT, OUT_OF_POLICY)]
    found += [_component_down(f"{c.name}-metrics") for c in components(repo)]
    return found


def _labels(repo: Repo, component: str) -> dict[str, Any]:
    meta = metadata(component, component, repo.namespace)
    meta["labels"] = {**meta["labels"], **repo.platform.spec.monitoring.labels}
    return meta


def service_monitor(repo: Repo, component: str) -> dict[str, Any]:
    return {
        "apiVersion": MONITORING_API, "kind": "ServiceMonitor",
        "metadata": _labels(repo, component),
        "spec": {
            "selector": {"matchLabels": selector(component)},
            "namespaceSelector": {"matchNames": [repo.namespace]},
            "endpoints": [{"port": METRICS_PORT_NAME, "path": "/metrics", "scheme": "http",
                           "interval": repo.platform.spec.monitoring.interval}],
        },
    }


def rule(alert: Alert) -> dict[str, Any]:
    """`alert` as one rule of the PrometheusRule's group."""
    labels = {"severity": alert.severity, **({"job": alert.job} if alert.job else {})}
    return {"alert": alert.name, "expr": alert.expr, "for": alert.for_, "labels": labels,
            "annotations": {"summary": alert.summary, "description": alert.description,
                            "runbook_url": alert.runbook_url}}


def prometheus_rule(repo: Repo) -> dict[str, Any]:
    return {
        "apiVersion": MONITORING_API, "kind": "PrometheusRule",
        "metadata": _labels(repo, RULE_NAME),
        "spec": {"groups": [{"name": "fivespot", "rules": [rule(a) for a in alerts(repo)]}]},
    }


def emit(repo: Repo) -> list[Artifact]:
    if not repo.platform.spec.monitoring.enabled:
        return []
    found = []
    for component in components(repo):
        monitor = service_monitor(repo, component.name)
        found.append(Artifact(MONITORING, f"{MONITORING}/{component.name}.servicemonitor.yaml", monitor))
    found.append(Artifact(MONITORING, f"{MONITORING}/{RULE_NAME}.prometheusrule.yaml",
                          prometheus_rule(repo)))
    return found
