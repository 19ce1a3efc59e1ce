"""The OpenAPI v3 schema a custom provider declares for its spec, typed like the API server types it.

A `ScheduleProvider`'s `custom[].specSchema` becomes the provider CRD's spec schema, which the
compiler then walks (CEL rules compiled and priced, bounds read) and the checker evaluates. So it
is validated here field by field, as apiextensions' JSONSchemaProps decodes it, with strict types
(a `maxLength` is an integer, a `properties` a mapping of schemas, a rule a string): a schema the
API server would not decode is a `FILE:LINE:COL` diagnostic, never a crash further on. Only the
keywords a structural CRD schema may use are accepted; `additionalProperties` takes a schema (a
boolean there adds nothing a structural schema can use: free-form data is
`x-kubernetes-preserve-unknown-fields: true`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class _SchemaModel(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, frozen=True, strict=True)


class ValidationRule(_SchemaModel):
    """One `x-kubernetes-validations` entry."""

    rule: str = Field(min_length=1)
    message: str | None = None
    message_expression: str | None = None
    reason: Literal["FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired",
                    "FieldValueDuplicate"] | None = None
    field_path: str | None = None
    optional_old_self: bool | None = None


class SpecSchema(_SchemaModel):
    """apiextensions.k8s.io/v1 JSONSchemaProps, the keywords a structural schema may use."""

    type: Literal["object", "array", "string", "integer", "number", "boolean"] | None = None
    description: str | None = None
    title: str | None = None
    format: str | None = None
    default: Any = None
    example: Any = None
    enum: list[Any] | None = None
    nullable: bool | None = None
    maximum: float | None = None
    exclusive_maximum: bool | None = None
    minimum: float | None = None
    exclusive_minimum: bool | None = None
    multiple_of: float | None = Field(default=None, gt=0)
    max_length: int | None = Field(default=None, ge=0)
    min_length: int | None = Field(default=None, ge=0)
    max_items: int | None = Field(default=None, ge=0)
    min_items: int | None = Field(default=None, ge=0)
    max_properties: int | None = Field(default=None, ge=0)
    min_properties: int | None = Field(default=None, ge=0)
    pattern: str | None = None
    unique_items: bool | None = None
    required: list[str] | None = None
    properties: dict[str, SpecSchema] | None = None
    additional_properties: SpecSchema | None = None
    items: SpecSchema | None = None
    all_of: list[SpecSchema] | None = None
    any_of: list[SpecSchema] | None = None
    one_of: list[SpecSchema] | None = None
    not_: SpecSchema | None = Field(default=None, alias="not")
    x_kubernetes_preserve_unknown_fields: bool | None = Field(
        default=None, alias="x-kubernetes-preserve-unknown-fields")
    x_kubernetes_embedded_resource: bool | None = Field(
        default=None, alias="x-kubernetes-embedded-resource")
    x_kubernetes_int_or_string: bool | None = Field(default=None, alias="x-kubernetes-int-or-string")
    x_kubernetes_list_type: Literal["atomic", "set", "map"] | None = Field(
        default=None, alias="x-kubernetes-list-type")
    x_kubernetes_list_map_keys: list[str] | None = Field(
        default=None, alias="x-kubernetes-list-map-keys")
    x_kubernetes_map_type: Literal["granular", "atomic"] | None = Field(
        default=None, alias="x-kubernetes-map-type")
    x_kubernetes_validations: list[ValidationRule] | None = Field(
        default=None, alias="x-kubernetes-validations")

    def as_dict(self) -> dict[str, Any]:
        """The schema as written (only the keywords given), for the CRD."""
        return self.model_dump(by_alias=True, exclude_unset=True)
