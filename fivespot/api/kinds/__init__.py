"""Pydantic models of the cluster kinds fivespot installs (ScheduledCapacity, ScheduledMachine,
the providers, TenantCapacityLimit). The compiler turns them into CRD schemas; the webhook and
the controllers read objects with them, so the schema a user is validated against and the shape a
process expects cannot drift apart.
"""
