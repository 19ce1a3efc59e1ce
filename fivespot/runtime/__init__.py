"""The controller runtime shared by the controllers, the webhook and `fivespot install`.

Small modules over the `kubernetes` client's connection, with no framework between a controller
and the API server: an informer (list + watch into a cache, stall detection), a work queue
(de-duplicating, delayed and rate-limited keys), a worker loop, per-partition Lease leader
election with a pure decision function, a health/metrics server, JSON logs. Every timing decision
takes an injected clock. Import each from its module (`fivespot.runtime.informer`, `fivespot.runtime.manager`...):
this package re-exports nothing, so importing one module does not load the others.
"""
