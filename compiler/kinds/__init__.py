"""Pydantic models of the cluster kinds fivespot installs (ScheduledCapacity, ScheduledMachine,
the providers). The compiler turns them into CRD schemas; the controllers read objects with them,
so the schema a user is validated against and the shape a controller expects cannot drift apart.
"""
