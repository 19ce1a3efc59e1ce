"""TenantCapacityLimit `policy.5spot.finos.org/v1alpha1`: the params object of the tenant VAP.

Each TenantPolicy in the config repo compiles into one of these (cluster-scoped) plus one
ValidatingAdmissionPolicyBinding whose paramRef names it, so one policy definition serves every
tenant and a tenant's limits are data a reviewer can read, not CEL.
"""

from __future__ import annotations

from typing import Final

from pydantic import Field

from fivespot.api.fieldpath import CAPACITY_PATH_PATTERN, MAX_PATH_LENGTH
from fivespot.api.kinds.base import KindModel

GROUP: Final = "policy.5spot.finos.org"
VERSION: Final = "v1alpha1"
KIND: Final = "TenantCapacityLimit"
PLURAL: Final = "tenantcapacitylimits"
API_VERSION: Final = f"{GROUP}/{VERSION}"


class AllowedConsumer(KindModel):
    """A kind this tenant may gate, and how."""

    group: str = Field(max_length=253, description="API group of the target kind.")
    kind: str = Field(max_length=63, description="Kind of the target.")
    capacity_paths: list[str] = Field(
        max_length=8, description="Fields that may be gated on this kind.",
        json_schema_extra={"items": {"type": "string", "maxLength": MAX_PATH_LENGTH,
                                     "pattern": CAPACITY_PATH_PATTERN}},
    )
    max_active_value: int = Field(ge=0, description="The consumer's own ceiling.")
    drained_path: str | None = Field(default=None, max_length=MAX_PATH_LENGTH,
                                     description="The consumer's in-use counter, if it has one.")


class TenantCapacityLimitSpec(KindModel):
    """Which consumers the namespaces of one TenantPolicy may gate, and how far."""

    tenant_policy: str = Field(max_length=63, description="The TenantPolicy this was compiled from.")
    namespaces: list[str] = Field(max_length=256, description="Namespaces it covers.",
                                  json_schema_extra={"items": {"type": "string", "maxLength": 63}})
    max_active_value: int = Field(ge=0, description="Largest activeValue these tenants may set.")
    allowed_nodes: list[str] = Field(
        default_factory=list, max_length=256, description="Nodes spec.nodeName may name; empty: any.",
        json_schema_extra={"items": {"type": "string", "maxLength": 253}},
    )
    consumers: list[AllowedConsumer] = Field(max_length=64, description="Allowed target kinds.")
