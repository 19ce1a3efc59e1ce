"""Prometheus' own `promtool test rules`, to evaluate a compiled alert rule as Prometheus does.

promtool comes from Debian's `prometheus` package, unpacked (`apt-get download` + `dpkg -x`, no
service started) once into the cache outside the repo; `apt-get install` is the fallback."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import yaml

from compiler.emit.monitoring import Alert
from devcluster.build import cache_root

PACKAGE = "prometheus"


def ensure_promtool() -> Path:
    """The path of promtool, unpacked from Debian's package into the cache if need be."""
    folder = cache_root() / "tools" / PACKAGE
    binary = folder / "usr" / "bin" / "promtool"
    if binary.is_file():
        return binary
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        downloaded = subprocess.run(["apt-get", "download", PACKAGE], cwd=work, capture_output=True,
                                    text=True, timeout=600)
        debs = list(Path(work).glob(f"{PACKAGE}_*.deb"))
        if downloaded.returncode == 0 and debs:
            subprocess.run(["dpkg", "-x", str(debs[0]), str(folder)], check=True,
                           capture_output=True, timeout=600)
            return binary
    installed = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                                PACKAGE], capture_output=True, text=True, timeout=900)
    if installed.returncode != 0:
        raise RuntimeError(f"promtool could not be had from Debian ({PACKAGE}): apt-get download "
                           f"said {downloaded.stderr.strip()[-300:]!r}, apt-get install said "
                           f"{installed.stderr.strip()[-300:]!r} (run apt-get update first?)")
    return Path("/usr/bin/promtool")


def rule_test(alert: Alert, *, series: str, values: str, firing_at: str, resolved_at: str,
              labels: dict[str, str], work: Path) -> None:
    """`alert`'s expression and `for`, fed `series` with `values` (promtool's notation, one a
    minute): firing at `firing_at` with `labels` (and its severity), not firing at
    `resolved_at`. Raises AssertionError with promtool's report when that does not hold."""
    rules = work / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": [{"name": "fivespot", "rules": [{
        "alert": alert.name, "expr": alert.expr, "for": alert.for_,
        "labels": {"severity": alert.severity}}]}]}))
    test = work / "rules.test.yaml"
    test.write_text(yaml.safe_dump({
        "rule_files": [str(rules)], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": [{"series": series, "values": values}],
                   "alert_rule_test": [
                       {"eval_time": firing_at, "alertname": alert.name,
                        "exp_alerts": [{"exp_labels": {**labels, "severity": alert.severity}}]},
                       {"eval_time": resolved_at, "alertname": alert.name, "exp_alerts": []}]}]}))
    answer = subprocess.run([str(ensure_promtool()), "test", "rules", str(test)],
                            capture_output=True, text=True, timeout=120)
    assert answer.returncode == 0, answer.stdout + answer.stderr
