"""CRD rules are type-checked against their node's schema the way the API server checks them."""

from __future__ import annotations

from typing import Any

import pytest

from fivespot.policies.cel import CelCompileError
from fivespot.policies.cel.typed import check_rule_types

DATE: dict[str, Any] = {"type": "string", "format": "date"}
STRINGS: dict[str, Any] = {"type": "array", "items": {"type": "string"}}

ACCEPTED = [
    ("string-matches", "self.matches('^a')", {"type": "string"}),
    ("date-compared-with-timestamp", "self < timestamp('2030-01-01T00:00:00Z')", DATE),
    ("int-compared-with-double", "self > 1.5", {"type": "integer"}),
    ("list-of-strings-sizes", "self.all(x, x.size() < 5)", STRINGS),
    ("object-fields-stay-dynamic", "self.a.b == 1", {"type": "object", "properties": {"a": {"type": "object"}}}),
    ("duration-format", "self < duration('1h')", {"type": "string", "format": "duration"}),
    ("transition-rule", "self >= oldSelf", {"type": "integer"}),
]

REFUSED = [
    ("string-function-on-date", "self.matches('^2026')", DATE),
    ("int-comparison-on-strings", "self.all(x, x > 5)", STRINGS),
    ("size-of-int", "self.size() > 1", {"type": "integer"}),
]


@pytest.mark.parametrize(("rule", "schema"), [(r, s) for _, r, s in ACCEPTED], ids=[i for i, _, _ in ACCEPTED])
def test_rule_that_fits_its_schema_type_checks(rule: str, schema: dict[str, Any]) -> None:
    check_rule_types(rule, schema)


@pytest.mark.parametrize(("rule", "schema"), [(r, s) for _, r, s in REFUSED], ids=[i for i, _, _ in REFUSED])
def test_rule_the_api_server_would_refuse_is_refused(rule: str, schema: dict[str, Any]) -> None:
    with pytest.raises(CelCompileError, match="found no matching overload"):
        check_rule_types(rule, schema)


def test_optional_old_self_is_typed_as_an_optional_of_self() -> None:
    check_rule_types("!oldSelf.hasValue() || self >= oldSelf.value()", {"type": "integer"},
                     optional_old_self=True)
