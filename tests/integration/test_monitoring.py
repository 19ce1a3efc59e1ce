"""The compiled monitoring installs against the real Prometheus Operator CRDs, and every alert
names only metrics the running processes export.

A `fivespot dev` session (tests/integration/test_dev.py runs the command; here the same session
object, in process) runs the scaffold repo with monitoring on: its install applies the
ServiceMonitors and the PrometheusRule to a real API server holding the upstream CRDs (server-side
apply, strict field validation), and every component runs, so its /metrics can be read.
"""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from fivespot.compiler.emit.monitoring import FIXED_ALERTS
from fivespot.compiler.scaffold import init
from fivespot.runtime import kube
from fivespot.devcluster.dev import DevSession

CRDS = Path(__file__).parent / "testdata" / "prometheus-operator-crds"
PROMETHEUS_GENERATED = {"up"}


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevSession]:
    root = tmp_path_factory.mktemp("monitoring")
    config = root / "config"
    init(config)
    platform = config / "platform.yaml"
    text, turned_on = re.subn(r"(?m)^(  minKubernetesVersion: .*\n)",
                              r"\1  monitoring: {enabled: true, labels: {release: prometheus}}\n",
                              platform.read_text())
    assert turned_on == 1, "the scaffold's platform.yaml no longer has its minKubernetesVersion line"
    platform.write_text(text)
    dev = DevSession(config, root / "state", sorted(CRDS.glob("*.yaml")), report=lambda _: None)
    try:
        dev.start()
        yield dev
    finally:
        dev.stop()


def _installed(dev: DevSession, plural: str) -> list[dict[str, object]]:
    listed = kube.request(dev.api, "GET", f"/apis/monitoring.coreos.com/v1/namespaces/5spot-system/{plural}")
    return list(listed.get("items") or [])


def test_a_service_monitor_per_component_and_the_rule_are_accepted_by_the_upstream_crds(
    session: DevSession,
) -> None:
    monitors = {m["metadata"]["name"] for m in _installed(session, "servicemonitors")}  # type: ignore[index]
    assert monitors == set(session.metrics_ports)
    (rule,) = _installed(session, "prometheusrules")
    alerts = [r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]]  # type: ignore[index]
    assert {a.name for a in FIXED_ALERTS} <= set(alerts)
    for item in _installed(session, "servicemonitors") + [rule]:
        assert item["metadata"]["labels"]["release"] == "prometheus"  # type: ignore[index]


def _exported(port: int) -> set[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update({"counter": {f"{family.name}_total"},
                      "histogram": {f"{family.name}_{s}" for s in ("bucket", "sum", "count")},
                      }.get(family.type, set()))
        names.update(sample.name for sample in family.samples)
    return names


def _missing(session: DevSession, rules: list[dict[str, str]]) -> dict[str, list[str]]:
    """Per alert, the metrics it names that no component exports now. A component still starting
    (the session waits only for the webhook to listen) exports nothing yet."""
    exported: set[str] = set()
    for port in session.metrics_ports.values():
        try:
            exported |= _exported(port)
        except OSError:
            continue
    missing = {}
    for entry in rules:
        names = set(re.findall(r"\b(fivespot_[a-z_]+|up)\b", entry["expr"]))
        assert names, entry["alert"]
        if unexported := sorted(names - exported - PROMETHEUS_GENERATED):
            missing[entry["alert"]] = unexported
    return missing


def test_every_metric_an_alert_names_is_exported_by_a_running_component(session: DevSession) -> None:
    out = session.state_dir / "out" / "monitoring" / "fivespot-alerts.prometheusrule.yaml"
    rules = yaml.safe_load(out.read_text())["spec"]["groups"][0]["rules"]
    deadline = time.monotonic() + 60
    while (missing := _missing(session, rules)) and time.monotonic() < deadline:
        session.check_processes()
        time.sleep(0.5)
    assert not missing, f"not exported by any component: {missing}"
