"""The engine behaves as Kubernetes' cel-go environment does, case by case.

Each expectation is what cel-go with the Kubernetes environment (API server >= 1.29) returns for
the same expression; the source is named where the behaviour is Kubernetes-specific.
"""

from __future__ import annotations

import pytest

from fivespot.policies.cel import (
    ABSENT,
    CRD_VARIABLES,
    CelCompileError,
    CelEvaluationError,
    compile_crd_rule,
    compile_expression,
    references_old_self,
)


def evaluate(expression: str, self_value: object = None) -> object:
    return compile_expression(expression, CRD_VARIABLES).evaluate({"self": self_value})


# --- language semantics -------------------------------------------------------------------------

INT_LESS_THAN_DOUBLE = "1 < 1.5"
DOUBLE_GREATER_THAN_UINT = "2.5 > 2u"
SIZE_COMPARED_TO_DOUBLE = "size(self) <= 2.5"
MIXED_COMPARISON_AT_RUNTIME = "self.replicas < self.ratio"
HAS_PRESENT = "has(self.a)"
HAS_ABSENT = "has(self.b)"
HAS_NULL_VALUE = "has(self.n)"
ALL_FALSE_ABSORBS_ERROR = "[0, -1].all(x, 10 / x > 0)"
EXISTS_TRUE_ABSORBS_ERROR = "[0, 1].exists(x, 10 / x > 0)"
OR_TRUE_ABSORBS_ERROR = "self.missing == 1 || true"
AND_FALSE_ABSORBS_ERROR = "self.missing == 1 && false"
RE2_TRAILING_NEWLINE = "'abc\\n'.matches('abc$')"
RE2_ASCII_DIGIT_CLASS = "'\u0663'.matches('^\\\\d$')"
STRING_SIZE_COUNTS_CODE_POINTS = "size('héllo')"

SEMANTICS = [
    ("cross-type numeric comparison of literals", INT_LESS_THAN_DOUBLE, None, True),
    ("double compared with uint", DOUBLE_GREATER_THAN_UINT, None, True),
    ("int function result compared with double", SIZE_COMPARED_TO_DOUBLE, [1, 2], True),
    ("dyn int compared with dyn double", MIXED_COMPARISON_AT_RUNTIME,
     {"replicas": 1, "ratio": 0.5}, False),
    ("has() of a present field", HAS_PRESENT, {"a": 1}, True),
    ("has() of an absent field", HAS_ABSENT, {"a": 1}, False),
    ("has() of a field holding null", HAS_NULL_VALUE, {"n": None}, True),
    ("all() is false when one element is false, despite an error", ALL_FALSE_ABSORBS_ERROR,
     None, False),
    ("exists() is true when one element is true, despite an error", EXISTS_TRUE_ABSORBS_ERROR,
     None, True),
    ("|| with true absorbs an error", OR_TRUE_ABSORBS_ERROR, {}, True),
    ("&& with false absorbs an error", AND_FALSE_ABSORBS_ERROR, {}, False),
    ("RE2 $ does not match before a trailing newline", RE2_TRAILING_NEWLINE, None, False),
    ("RE2 \\d is ASCII only", RE2_ASCII_DIGIT_CLASS, None, False),
    ("size() counts code points", STRING_SIZE_COUNTS_CODE_POINTS, None, 5),
]


@pytest.mark.parametrize(
    ("expression", "self_value", "expected"),
    [case[1:] for case in SEMANTICS],
    ids=[case[0] for case in SEMANTICS],
)
def test_language_semantics_match_cel_go(
    expression: str, self_value: object, expected: object
) -> None:
    assert evaluate(expression, self_value) == expected


# --- runtime errors and their wording -----------------------------------------------------------

MISSING_KEY = "self.spec.replicas > 0"
ALL_ERRORS_WITHOUT_FALSE = "[0, 1].all(x, 10 / x > 0)"
INDEX_OUT_OF_RANGE = "self.items[3] == 1"
DIVISION_BY_ZERO = "self.a / 0 == 1"
NO_SUCH_OVERLOAD = "self.a + 'x' == 'y'"
HAS_ON_A_STRING = "has(self.name.first)"

RUNTIME_ERRORS: list[tuple[str, str, object, str]] = [
    ("missing key", MISSING_KEY, {"spec": {}}, "no such key: replicas"),
    ("all() with only errors and trues is an error", ALL_ERRORS_WITHOUT_FALSE, None,
     "division by zero"),
    ("index out of range", INDEX_OUT_OF_RANGE, {"items": [1]},
     "index '3' out of range in list size '1'"),
    ("division by zero", DIVISION_BY_ZERO, {"a": 1}, "division by zero"),
    ("no overload for the runtime types", NO_SUCH_OVERLOAD, {"a": 1}, "no such overload"),
    ("has() on a non-map keeps the engine wording", HAS_ON_A_STRING, {"name": "x"},
     "Applying SELECT to non-message type"),
]


@pytest.mark.parametrize(
    ("expression", "self_value", "message"),
    [case[1:] for case in RUNTIME_ERRORS],
    ids=[case[0] for case in RUNTIME_ERRORS],
)
def test_runtime_errors_use_cel_go_wording(
    expression: str, self_value: object, message: str
) -> None:
    with pytest.raises(CelEvaluationError) as caught:
        evaluate(expression, self_value)
    assert caught.value.message.startswith(message)
    assert caught.value.expression == expression


# --- compile-time rejections Kubernetes makes ---------------------------------------------------

MIXED_LIST_LITERAL = "self.x in [1, 'a']"
MIXED_MAP_VALUES = "{'a': 1, 'b': 'x'}.size() == 2"
MIXED_NESTED_LIST = "[[1], ['a']].size() == 2"
MIXED_MAP_KEYS = "{1: 'a', 'b': 'c'}.size() == 2"
INVALID_DURATION = "duration('1 hour') > duration('0s')"
INVALID_TIMESTAMP = "timestamp('2024-13-01T00:00:00Z') > timestamp('2024-01-01T00:00:00Z')"
BACKREFERENCE_PATTERN = "self.matches('(a)\\\\1')"
LOOKAHEAD_PATTERN = "self.matches('a(?=b)')"
INVALID_FIND_PATTERN = "self.find('[a-') == ''"
INVALID_FIND_ALL_PATTERN = "self.findAll('(') == []"

REJECTED_AT_COMPILE_TIME = [
    ("mixed list literal", MIXED_LIST_LITERAL, "expected type 'int' but found 'string'"),
    ("mixed map values", MIXED_MAP_VALUES, "expected type 'int' but found 'string'"),
    ("mixed nested lists", MIXED_NESTED_LIST,
     "expected type 'list(int)' but found 'list(string)'"),
    ("mixed map keys", MIXED_MAP_KEYS, "expected type 'int' but found 'string'"),
    ("invalid duration literal", INVALID_DURATION, "invalid duration argument"),
    ("invalid timestamp literal", INVALID_TIMESTAMP, "invalid timestamp argument"),
    ("RE2 rejects backreferences", BACKREFERENCE_PATTERN, "invalid matches argument"),
    ("RE2 rejects lookahead", LOOKAHEAD_PATTERN, "invalid matches argument"),
    ("invalid find() pattern", INVALID_FIND_PATTERN, "invalid find argument"),
    ("invalid findAll() pattern", INVALID_FIND_ALL_PATTERN, "invalid findAll argument"),
]


@pytest.mark.parametrize(
    ("expression", "message"),
    [case[1:] for case in REJECTED_AT_COMPILE_TIME],
    ids=[case[0] for case in REJECTED_AT_COMPILE_TIME],
)
def test_kubernetes_rejects_these_at_compile_time(expression: str, message: str) -> None:
    with pytest.raises(CelCompileError) as caught:
        compile_expression(expression, CRD_VARIABLES)
    assert message in caught.value.message


def test_literal_errors_point_at_the_literal() -> None:
    with pytest.raises(CelCompileError) as caught:
        compile_expression("self.d > duration('1 hour')", CRD_VARIABLES)
    assert caught.value.message == (
        "ERROR: <input>:1:19: invalid duration argument\n"
        " | self.d > duration('1 hour')\n"
        " | ..................^"
    )


HOMOGENEOUS_WITH_DYN_ELEMENTS = "[self.a, 1].size() == 2"
FORMAT_TAKES_MIXED_LISTS = "'%s has %d'.format([self.name, 3]) == 'x has 3'"
VALID_LITERALS = "duration('1h30m') > duration('0s') && self.matches('^a+$')"
CROSS_TYPE_AND_LITERAL_CHECKS = "size(self) < 2.5 && [1, 2].size() == 2"

ACCEPTED = [
    ("dyn elements join a typed list", HOMOGENEOUS_WITH_DYN_ELEMENTS),
    ("format() is exempt from the homogeneous check", FORMAT_TAKES_MIXED_LISTS),
    ("valid literals compile", VALID_LITERALS),
    ("cross-type comparison beside literal checks", CROSS_TYPE_AND_LITERAL_CHECKS),
]


@pytest.mark.parametrize(
    "expression", [case[1] for case in ACCEPTED], ids=[case[0] for case in ACCEPTED]
)
def test_kubernetes_accepts_these(expression: str) -> None:
    compile_expression(expression, CRD_VARIABLES)


# --- Kubernetes library functions ---------------------------------------------------------------

LIBRARY = [
    ("isSorted on a sorted list", "[1, 2, 2, 5].isSorted()", True),
    ("isSorted on strings", "['b', 'a'].isSorted()", False),
    ("sum of ints", "[1, 2, 3].sum()", 6),
    ("sum of doubles", "[1.5, 2.5].sum()", 4.0),
    ("sum of an empty list", "[].sum()", 0),
    ("min", "[3, 1, 2].min()", 1),
    ("max", "['a', 'c', 'b'].max()", "c"),
    ("list indexOf", "[1, 2, 3, 2].indexOf(2)", 1),
    ("list lastIndexOf", "[1, 2, 3, 2].lastIndexOf(2)", 3),
    ("list indexOf not found", "[1, 2].indexOf(5)", -1),
    ("string indexOf still works", "'banana'.indexOf('an')", 1),
    ("find returns the whole first match", "'abc 123 def 456'.find('[0-9]+')", "123"),
    ("find ignores capture groups", "'key=value'.find('(k)ey=(v)')", "key=v"),
    ("find without a match is empty", "'abc'.find('[0-9]+')", ""),
    ("findAll", "'abc 123 def 456'.findAll('[0-9]+')", ["123", "456"]),
    ("findAll with a limit", "'a1b2c3'.findAll('[0-9]', 2)", ["1", "2"]),
    ("isURL of an absolute URL", "isURL('https://example.com:8443/path?x=1')", True),
    ("isURL of a relative reference", "isURL('example.com/path')", False),
    ("isURL of an absolute path", "isURL('/path')", True),
    ("URL scheme", "url('HTTPS://example.com').getScheme()", "https"),
    ("URL host keeps the port", "url('https://example.com:8443/p').getHost()", "example.com:8443"),
    ("URL hostname", "url('https://[::1]:80/p').getHostname()", "::1"),
    ("URL port", "url('https://example.com:8443/p').getPort()", "8443"),
    ("URL escaped path", "url('https://example.com/a b').getEscapedPath()", "/a%20b"),
    ("URL query", "url('https://e.com/?a=1&a=2&b').getQuery()", {"a": ["1", "2"], "b": [""]}),
    ("isIP", "isIP('10.0.0.1') && isIP('::1') && !isIP('10.0.0.256')", True),
    ("isIP rejects leading zeros", "isIP('010.0.0.1')", False),
    ("isIP rejects zones", "isIP('fe80::1%eth0')", False),
    ("isIP rejects IPv4-mapped IPv6", "isIP('::ffff:10.0.0.1')", False),
    ("IP family", "ip('10.0.0.1').family() + ip('::1').family()", 10),
    ("IP equality is by address", "ip('2001:db8::1') == ip('2001:0db8:0::1')", True),
    ("IP canonical form", "ip.isCanonical('2001:db8::1') && !ip.isCanonical('2001:DB8::1')", True),
    ("IP loopback", "ip('127.0.0.1').isLoopback()", True),
    ("IP unspecified", "ip('::').isUnspecified()", True),
    ("IP link-local unicast", "ip('169.254.1.1').isLinkLocalUnicast()", True),
    ("IP global unicast", "ip('8.8.8.8').isGlobalUnicast()", True),
    ("string(ip)", "string(ip('10.0.0.1'))", "10.0.0.1"),
    ("CIDR contains IP", "cidr('10.0.0.0/8').containsIP(ip('10.1.2.3'))", True),
    ("CIDR contains IP string", "cidr('10.0.0.0/8').containsIP('11.0.0.1')", False),
    ("CIDR contains CIDR", "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')", True),
    ("CIDR does not contain a wider CIDR", "cidr('10.1.0.0/16').containsCIDR('10.0.0.0/8')", False),
    ("CIDR keeps its address", "string(cidr('10.1.2.3/8').ip())", "10.1.2.3"),
    ("CIDR masked", "string(cidr('10.1.2.3/8').masked())", "10.0.0.0/8"),
    ("CIDR prefix length", "cidr('2001:db8::/32').prefixLength()", 32),
    ("isCIDR", "isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0/33') && !isCIDR('10.0.0.0')", True),
    ("isQuantity", "isQuantity('1.5Gi') && isQuantity('100m') && !isQuantity('1.5GB')", True),
    ("quantity comparison", "quantity('1Gi').compareTo(quantity('1024Mi'))", 0),
    ("quantity less than", "quantity('500m').isLessThan(quantity('1'))", True),
    ("quantity greater than", "quantity('2k').isGreaterThan(quantity('1999'))", True),
    ("quantity as integer", "quantity('2k').asInteger()", 2000),
    ("quantity is integer", "quantity('1500m').isInteger()", False),
    ("quantity approximate float", "quantity('1500m').asApproximateFloat()", 1.5),
    ("quantity sign", "quantity('-3').sign()", -1),
    ("quantity exponent", "quantity('1e3').asInteger()", 1000),
    ("quantity add", "quantity('1Gi').add(quantity('1Gi')).asInteger()", 2 * 1024**3),
    ("quantity sub of an int", "quantity('10').sub(3).asInteger()", 7),
]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [case[1:] for case in LIBRARY],
    ids=[case[0] for case in LIBRARY],
)
def test_kubernetes_library_functions(expression: str, expected: object) -> None:
    assert evaluate(expression) == expected


LIBRARY_ERRORS = [
    ("min of an empty list", "[].min()", "min called on empty list"),
    ("quantity that is not one", "quantity('1.5GB')", "quantities must match"),
    ("non-integer quantity as integer", "quantity('1.5').asInteger()",
     "cannot convert value to integer"),
    ("ip of a non-address", "ip('10.0.0.256')", "IP Address '10.0.0.256' parse error"),
    ("url of a relative reference", "url('example.com')", "URL parse error"),
    ("find with a dynamic invalid pattern", "'a'.find(self)", "error parsing regexp"),
]


@pytest.mark.parametrize(
    ("expression", "message"),
    [case[1:] for case in LIBRARY_ERRORS],
    ids=[case[0] for case in LIBRARY_ERRORS],
)
def test_kubernetes_library_errors(expression: str, message: str) -> None:
    with pytest.raises(CelEvaluationError) as caught:
        evaluate(expression, "(")
    assert message in caught.value.message


# --- transition rules ----------------------------------------------------------------------------

IMMUTABLE = "self == oldSelf"
NO_DECREASE = "self.value >= oldSelf.value"
SHADOWED_OLD_SELF = "self.items.all(oldSelf, oldSelf > 0)"
PLAIN_RULE = "self.value >= 0"


@pytest.mark.parametrize(
    ("rule", "transition"),
    [(IMMUTABLE, True), (NO_DECREASE, True), (SHADOWED_OLD_SELF, False), (PLAIN_RULE, False)],
)
def test_rules_reading_old_self_are_transition_rules(rule: str, transition: bool) -> None:
    assert references_old_self(rule) is transition


def test_transition_rules_are_skipped_without_an_old_value() -> None:
    rule = compile_crd_rule(NO_DECREASE)
    assert rule.evaluate({"value": 1}) is None
    assert rule.evaluate({"value": 1}, ABSENT) is None
    assert rule.evaluate({"value": 1}, {"value": 2}) is False
    assert rule.evaluate({"value": 3}, {"value": 2}) is True


def test_plain_rules_run_on_create() -> None:
    assert compile_crd_rule(PLAIN_RULE).evaluate({"value": -1}) is False


OPTIONAL_GUARDED = "oldSelf.hasValue() ? self >= oldSelf.value() : self == 0"
OPTIONAL_OR_VALUE = "self >= oldSelf.orValue(0)"


def test_optional_old_self_rules_run_on_create_with_none() -> None:
    rule = compile_crd_rule(OPTIONAL_GUARDED, optional_old_self=True)
    assert rule.evaluate(0) is True
    assert rule.evaluate(5) is False
    assert rule.evaluate(5, 4) is True
    assert rule.evaluate(3, 4) is False
    assert compile_crd_rule(OPTIONAL_OR_VALUE, optional_old_self=True).evaluate(2) is True


def test_optional_old_self_is_typed_as_an_optional() -> None:
    with pytest.raises(CelCompileError, match="optional_type"):
        compile_crd_rule("self >= oldSelf", optional_old_self=True)


def test_optional_old_self_on_a_rule_without_old_self_is_refused() -> None:
    with pytest.raises(CelCompileError, match="may not be set if oldSelf is not used in rule"):
        compile_crd_rule(PLAIN_RULE, optional_old_self=True)


def test_crd_rules_must_evaluate_to_a_bool() -> None:
    with pytest.raises(CelCompileError, match="cel expression must evaluate to a bool"):
        compile_crd_rule("size(self)")


def test_a_rule_remembers_its_verdict_per_scalar_type_and_value() -> None:
    typed = compile_crd_rule("type(self) == int")
    assert [typed.evaluate(v) for v in (1, 1.0, True, "1", 1, 1.0)] == [
        True, False, False, False, True, False]
    assert len(typed.seen) == 4
    signed = compile_crd_rule("string(self) == '-0'")
    assert [signed.evaluate(v) for v in (0.0, -0.0, 0.0, -0.0)] == [False, True, False, True]


def test_a_rule_with_an_old_value_or_on_an_object_is_evaluated_every_time() -> None:
    rule = compile_crd_rule("self >= oldSelf")
    assert [rule.evaluate(2, 1), rule.evaluate(2, 3), rule.evaluate(2)] == [True, False, None]
    assert compile_crd_rule(PLAIN_RULE).evaluate({"value": 1}) is True
    assert not rule.seen
