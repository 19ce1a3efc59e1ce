"""The pydantic bases the cluster kinds' models share: camelCase field names as Kubernetes
writes them, and immutable values so decisions cannot mutate their inputs. A kind fivespot owns
refuses unknown fields (the CRD prunes them; a model must not quietly accept what the API server
would drop); a kind another controller writes keeps them (its CRD preserves them).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class KindModel(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        alias_generator=to_camel,
        frozen=True,
    )


class PreservingModel(BaseModel):
    """A kind, or part of one, that another controller writes: fields fivespot does not model are
    kept and never refused, and its schema says `x-kubernetes-preserve-unknown-fields`."""

    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
        alias_generator=to_camel,
        frozen=True,
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
