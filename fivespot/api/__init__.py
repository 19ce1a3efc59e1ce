"""The cluster API: what fivespot puts into a cluster, and how its processes find each other.

The ground floor every other package stands on, like kubebuilder's `fivespot/api/<version>/*_types.go`:
the generator (`compiler`) turns these models into CRDs, and the running processes (`webhook`,
`controllers`, on `runtime`) read objects and their configuration with the very same models.

- `kinds/`       the cluster kinds (ScheduledCapacity, ScheduledMachine, the provider kinds,
                 TenantCapacityLimit) as pydantic models: schema source and object parser
- `fieldpath`    the field-path rule (which fields a ScheduledCapacity may name)
- `identities`   component names, ServiceAccounts, lease names, ports, the bundle's ConfigMap
- `providers`    the one registry of built-in schedule providers
- `conditions`   the status-condition rule every controller reports by (kstatus: Ready,
                 Reconciling, Stalled)
- `bundle`       the compiled bundle: one typed model, one parser, one error type

It imports no other fivespot package, and nothing that talks to an API server.
"""
