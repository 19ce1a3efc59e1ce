"""The runtime's Prometheus metrics, defined once so every controller reports the same names.

Each series carries a `controller` label (the component: capacity controller or a provider), so
several controllers sharing one registry, as in tests, never mix their numbers. They live in the
default registry, which also carries the process collectors (`process_resident_memory_bytes`
is what the benchmark reads for RSS).
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter, Gauge, Histogram

RECONCILE_DURATION: Final = Histogram(
    "fivespot_reconcile_duration_seconds",
    "Time spent in one reconcile of one key.",
    ["controller"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
RECONCILE_ERRORS: Final = Counter(
    "fivespot_reconcile_errors_total",
    "Reconciles that failed and were re-queued with backoff.",
    ["controller"],
)
QUEUE_DEPTH: Final = Gauge(
    "fivespot_workqueue_depth", "Keys ready to be processed.", ["queue"]
)
QUEUE_ADDS: Final = Counter("fivespot_workqueue_adds_total", "Keys added to the queue.", ["queue"])
QUEUE_RETRIES: Final = Counter(
    "fivespot_workqueue_retries_total", "Rate-limited re-adds after a failure.", ["queue"]
)
IS_LEADER: Final = Gauge(
    "fivespot_is_leader", "1 while this replica leads the partition.", ["controller", "partition"]
)
WRITES: Final = Counter(
    "fivespot_writes_total",
    "Writes made to the API server, by what was written (target, status, lease).",
    ["controller", "what"],
)
HANDBACK_TIMEOUTS: Final = Counter(
    "fivespot_handback_timeouts_total",
    "Handbacks that reached their deadline undrained (phase HandbackTimedOut).",
    ["controller"],
)
HOST_GOVERNANCE_CONFLICTS: Final = Counter(
    "fivespot_host_governance_conflicts_total",
    "ScheduledCapacities that entered HostGovernanceConflict=True.",
    ["controller"],
)
FIELD_GOVERNANCE_CONFLICTS: Final = Counter(
    "fivespot_field_governance_conflicts_total",
    "ScheduledCapacities that began yielding their field to an older one naming it "
    "(FieldGovernanceConflict=True, phase Error).",
    ["controller"],
)
GOVERNANCE_CONFLICTED: Final = Gauge(
    "fivespot_governance_conflicted_objects",
    "ScheduledCapacities in a governance conflict now, in the partitions this replica leads: "
    "rule=host (HostGovernanceConflict=True, held at 0) or rule=field (yielding to an older "
    "ScheduledCapacity, writing nothing).",
    ["controller", "rule"],
)
WATCH_RESTARTS: Final = Counter(
    "fivespot_watch_restarts_total",
    "Watches restarted, by reason (closed, gone, stall, error).",
    ["resource", "reason"],
)
WATCH_STALLS: Final = Counter(
    "fivespot_watch_stalls_total",
    "Watches that saw no event and no bookmark for longer than the stall threshold.",
    ["resource"],
)
WATCH_HEALTHY: Final = Gauge(
    "fivespot_watch_healthy", "1 while the watch is synced and not stalled.", ["resource"]
)
SPOT_SCHEDULE_RESOLUTION_ERRORS: Final = Counter(
    "fivespot_spot_schedule_resolution_errors_total",
    "Reconciles whose spot-schedule reference did not resolve (the provider contract), by reason: "
    "ProviderCRDNotInstalled, ScheduleNotFound, ActiveMissing, ActiveNotBool, ScheduleNotReady, "
    "ScheduleLookupFailed.",
    ["controller", "reason"],
)
OUT_OF_POLICY: Final = Gauge(
    "fivespot_objects_out_of_policy",
    "ScheduledCapacities the admission policies in force now would deny (a TenantPolicy tightened "
    "after they were stored), per namespace, in the partitions this replica leads: each is held "
    "at 0 by the capacity controller and listed in its namespace's PolicyReport.",
    ["namespace"],
)
