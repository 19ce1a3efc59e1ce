"""Self-managed certificate rules, with a fake clock: when the serving certificate and the CA
renew, how a new CA is staged into the caBundle before it signs, and what the Secret holds."""

from __future__ import annotations

import base64
import datetime
from typing import Any

import pytest
from cryptography import x509

from fivespot.webhook.certificates import (
    Lifetimes,
    ServingNames,
    TLSState,
    ca_bundle_patch,
    next_due,
    plan,
    renew_at,
)

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
DAY = datetime.timedelta(days=1)
LIFETIMES = Lifetimes(ca=30 * DAY, serving=9 * DAY, overlap=datetime.timedelta(hours=1))
NAMES = ServingNames.for_service("fivespot-webhook", "5spot-system", ["127.0.0.1"])


def at(days: float) -> datetime.datetime:
    return T0 + datetime.timedelta(days=days)


def step(state: TLSState | None, days: float) -> TLSState:
    """`plan` at that time, keeping `state` when nothing is due."""
    wanted = plan(state, at(days), LIFETIMES, NAMES)
    assert wanted is not None or state is not None
    return wanted or state  # type: ignore[return-value]


def signer_of(state: TLSState) -> int:
    return next(i for i, a in enumerate(state.authorities) if a.signed(state.serving_cert))


def test_from_nothing_a_ca_and_a_serving_certificate_it_signs_with_the_service_names() -> None:
    state = step(None, 0)
    assert len(state.authorities) == 1 and signer_of(state) == 0
    sans = state.serving_cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [
        "fivespot-webhook.5spot-system.svc", "fivespot-webhook.5spot-system.svc.cluster.local"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert state.serving_cert.not_valid_after_utc == at(9)


def test_nothing_changes_before_two_thirds_of_the_serving_lifetime() -> None:
    state = step(None, 0)
    assert plan(state, at(5.9), LIFETIMES, NAMES) is None
    renewed = plan(state, at(6.01), LIFETIMES, NAMES)
    assert renewed is not None and renewed.serving_cert_pem != state.serving_cert_pem
    assert renewed.authorities == state.authorities  # same CA: no caBundle change at all
    assert renew_at(state.serving_cert, LIFETIMES.renew_fraction) == at(6)


def test_a_new_ca_is_published_first_and_signs_only_after_the_overlap() -> None:
    state = step(None, 0)
    for day in (6.5, 13, 19.5):  # serving renewals on the first CA
        state = step(state, day)
    published = step(state, 20.01)  # 2/3 of the CA's 30 days
    assert len(published.authorities) == 2
    assert signer_of(published) == 0, "the new CA must not sign before clients trust it"
    assert published.ca_bundle.count(b"BEGIN CERTIFICATE") == 2
    assert plan(published, at(20.01) + datetime.timedelta(minutes=59), LIFETIMES, NAMES) is None
    switched = step(published, 20.01 + 1.01 / 24)
    assert len(switched.authorities) == 2 and signer_of(switched) == 1
    assert switched.authorities[0].cert == state.authorities[0].cert, "old CA kept for overlap"


def test_an_expired_ca_leaves_the_bundle() -> None:
    state = step(None, 0)
    for day in (6.5, 13, 19.5, 20.01, 20.1, 26, 30.01):
        state = step(state, day)
    assert len(state.authorities) == 1 and signer_of(state) == 0
    assert state.authorities[0].cert.not_valid_after_utc > at(30.01)


def test_a_serving_certificate_never_outlives_its_ca() -> None:
    state = step(None, 0)
    late = step(state, 25)  # the second CA is published at 25 but cannot sign yet
    assert signer_of(late) == 0
    assert late.serving_cert.not_valid_after_utc == state.authorities[0].cert.not_valid_after_utc


def test_new_names_reissue_the_serving_certificate_at_once() -> None:
    state = step(None, 0)
    moved = plan(state, at(1), LIFETIMES, ServingNames.for_service("fivespot-webhook", "other"))
    assert moved is not None and moved.authorities == state.authorities
    assert "fivespot-webhook.other.svc" in moved.serving_cert.extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)


def test_shortened_lifetimes_renew_what_the_secret_holds_on_the_new_schedule() -> None:
    long_lived = plan(None, at(0), Lifetimes(ca=365 * DAY, serving=90 * DAY), NAMES)
    assert long_lived is not None
    assert plan(long_lived, at(5.9), LIFETIMES, NAMES) is None
    assert next_due(long_lived, LIFETIMES, at(1)) == at(6)
    renewed = plan(long_lived, at(6.01), LIFETIMES, NAMES)
    assert renewed is not None and renewed.serving_cert.not_valid_after_utc == at(6.01 + 9)
    assert renewed.authorities == long_lived.authorities
    staged = plan(renewed, at(20.01), LIFETIMES, NAMES)  # 2/3 of the configured 30-day CA
    assert staged is not None and len(staged.authorities) == 2


def test_the_secret_round_trips_and_a_damaged_secret_is_replaced() -> None:
    state = step(None, 0)
    data = state.secret_data()
    assert set(data) == {"tls.crt", "tls.key", "ca.crt", "ca.key"}
    again = TLSState.from_secret_data(data)
    assert again is not None and plan(again, at(1), LIFETIMES, NAMES) is None
    assert TLSState.from_secret_data({**data, "ca.key": base64.b64encode(b"junk").decode()}) is None
    assert TLSState.from_secret_data({}) is None
    other = step(None, 0)
    mismatched = {**data, "ca.key": other.secret_data()["ca.key"]}
    assert TLSState.from_secret_data(mismatched) is None
    assert plan(None, at(0), LIFETIMES, NAMES) is not None


def test_the_next_check_is_the_earliest_renewal_switch_or_expiry() -> None:
    state = step(None, 0)
    assert next_due(state, LIFETIMES, at(0)) == at(0) + LIFETIMES.overlap
    assert next_due(state, LIFETIMES, at(1)) == at(6), "passed points never make a loop spin"
    published = step(step(step(step(state, 6.5), 13), 19.5), 20.01)
    assert next_due(published, LIFETIMES, at(20.01)) == at(20.01) + LIFETIMES.overlap


def test_lifetimes_that_leave_no_room_for_the_overlap_are_refused() -> None:
    with pytest.raises(ValueError, match="overlap"):
        Lifetimes(ca=datetime.timedelta(hours=3), serving=datetime.timedelta(hours=1),
                  overlap=datetime.timedelta(hours=1))
    with pytest.raises(ValueError, match="outlive"):
        Lifetimes(ca=DAY, serving=2 * DAY)


def _hook(name: str, bundle: str | None) -> dict[str, Any]:
    """A webhook entry as the API server returns it (caBundle absent when None)."""
    config = {"service": {"name": "fivespot-webhook"}}
    return {"name": name, "clientConfig": config if bundle is None else {**config, "caBundle": bundle}}


def test_the_cabundle_patch_touches_only_stale_cabundle_fields_each_guarded_by_name() -> None:
    hooks = [_hook("a.5spot.finos.org", "NEW"), _hook("b.5spot.finos.org", None)]
    assert ca_bundle_patch(hooks, "NEW") == [
        {"op": "test", "path": "/webhooks/1/name", "value": "b.5spot.finos.org"},
        {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": "NEW"}]
    assert ca_bundle_patch([_hook("a", "NEW")], "NEW") == []
