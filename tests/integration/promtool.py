"""Prometheus' own `promtool test rules`, to evaluate a compiled alert rule as Prometheus does.

promtool comes from Debian's `prometheus` package, unpacked once into the cache outside the repo
(`fivespot.devcluster.debian`: no service started); `apt-get install` is the fallback."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from fivespot.compiler.emit.monitoring import Alert, rule
from fivespot.devcluster import debian
from fivespot.devcluster.build import cache_root

PACKAGE = "prometheus"


def ensure_promtool() -> Path:
    """The path of promtool, unpacked from Debian's package into the cache if need be."""
    folder = cache_root() / "tools" / PACKAGE
    binary = folder / "usr" / "bin" / "promtool"
    if binary.is_file():
        return binary
    try:
        debian.unpack([PACKAGE], folder)
        return binary
    except debian.DebianUnavailable as error:
        downloaded = str(error)
    try:
        debian.install(PACKAGE)
    except debian.DebianUnavailable as error:
        raise RuntimeError(f"promtool could not be had from Debian ({PACKAGE}): {downloaded}; "
                           f"{error}") from None
    return Path("/usr/bin/promtool")


def rule_test(alert: Alert, *, series: str, values: str, firing_at: str, resolved_at: str,
              labels: dict[str, str], work: Path) -> None:
    """`alert`'s expression and `for`, fed `series` with `values` (promtool's notation, one a
    minute): firing at `firing_at` with `labels` (and the rule's own), not firing at
    `resolved_at`. Raises AssertionError with promtool's report when that does not hold."""
    # The rule as compiled, without its annotations: promtool would compare their rendered text.
    compiled = {key: value for key, value in rule(alert).items() if key != "annotations"}
    rules = work / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": [{"name": "fivespot", "rules": [compiled]}]}))
    test = work / "rules.test.yaml"
    test.write_text(yaml.safe_dump({
        "rule_files": [str(rules)], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": [{"series": series, "values": values}],
                   "alert_rule_test": [
                       {"eval_time": firing_at, "alertname": alert.name,
                        "exp_alerts": [{"exp_labels": {**labels, **compiled["labels"]}}]},
                       {"eval_time": resolved_at, "alertname": alert.name, "exp_alerts": []}]}]}))
    answer = subprocess.run([str(ensure_promtool()), "test", "rules", str(test)],
                            capture_output=True, text=True, timeout=120)
    assert answer.returncode == 0, answer.stdout + answer.stderr
