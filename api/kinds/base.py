"""The pydantic base every cluster kind's model shares: camelCase field names as Kubernetes
writes them, unknown fields refused (the CRD prunes them; a model must not quietly accept what
the API server would drop), and immutable values so decisions cannot mutate their inputs.
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
