"""The controller runtime shared by the capacity controller, the providers and the webhook.

Small modules over the `kubernetes` client's connection, with no framework between a controller
and the API server: an informer (list + watch into a cache, stall detection), a work queue
(de-duplicating, delayed and rate-limited keys), a worker loop, per-partition Lease leader
election with a pure decision function, a health/metrics server, JSON logs. Every timing decision
takes an injected clock.
"""

from runtime.cache import ADDED, DELETED, MODIFIED, RESYNC, Cache, Delta
from runtime.clock import SYSTEM_CLOCK, Clock, SystemClock
from runtime.health import HealthServer
from runtime.informer import EventHandler, Informer
from runtime.kube import ApiError, ResolvedKind, load_client, merge_patch, resolve_kind
from runtime.leaderelection import (
    Action,
    LeaderElector,
    LeaseView,
    Timing,
    Verdict,
    decide,
    default_identity,
    leases_for,
)
from runtime.partitions import Partitions
from runtime.reconcile import Request, Result
from runtime.workers import Workers
from runtime.workqueue import ExponentialBackoff, WorkQueue

__all__ = [
    "ADDED", "DELETED", "MODIFIED", "RESYNC", "SYSTEM_CLOCK",
    "Action", "ApiError", "Cache", "Clock", "Delta", "EventHandler",
    "ExponentialBackoff", "HealthServer", "Informer", "LeaderElector", "LeaseView", "Partitions",
    "Request", "ResolvedKind", "Result", "SystemClock", "Timing", "Verdict", "WorkQueue", "Workers", "decide",
    "default_identity", "leases_for", "load_client", "merge_patch", "resolve_kind",
]
