"""The peers bench's CPU trace: where a round's two cores went, read between its boundary and
its last write (bench/peers/run.py, `CpuTrace` and `cpu_table`)."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.unit

RUN = Path(__file__).resolve().parents[2] / "bench" / "peers" / "run.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_peers_run", RUN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_a_trace_reads_its_own_process_and_stops(bench: ModuleType) -> None:
    trace = bench.CpuTrace({"me": [os.getpid()]})
    while not trace.readings:
        time.sleep(0.01)
    started = time.time()
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        pass
    trace.stop()
    spent = trace.between(started, time.time() - 0.05)
    assert spent is not None and spent["cpu_s"]["me"] >= 0.2
    assert bench.cpu_of({"me": [os.getpid()]})["bench"] >= 0.2


def test_between_interpolates_the_readings_around_the_span_and_is_none_outside_them(
        bench: ModuleType) -> None:
    trace = bench.CpuTrace({})
    trace.stop()
    trace.readings = [(10.0, {"kube-apiserver": 1.0}), (10.2, {"kube-apiserver": 1.3}),
                      (10.4, {"kube-apiserver": 1.7}), (10.6, {"kube-apiserver": 2.0})]
    assert trace.between(10.1, 10.5) == {"span_s": 0.4, "cpu_s": {"kube-apiserver": 0.7}}
    assert trace.between(10.2, 10.4) == {"span_s": 0.2, "cpu_s": {"kube-apiserver": 0.4}}
    assert trace.between(9.9, 10.3) is None
    assert trace.between(10.1, 10.7) is None


def test_the_cpu_table_shows_each_tools_median_round_and_the_cores_it_kept_busy(
        bench: ModuleType) -> None:
    def round_(last: float, apiserver: float) -> dict[str, object]:
        return {"last_s": last, "cpu_to_last": {"span_s": last, "cpu_s": {
            "kube-apiserver": apiserver, "etcd": 0.3, "kube-green": 0.01}}}
    results = {"rounds": {"fivespot": [round_(3.0, 2.7), round_(2.0, 1.7), round_(4.0, 3.7)],
                          "gokubedownscaler": [{"last_s": None}]}}
    text = bench.cpu_table(results)
    assert "  fivespot: 3.00 s, 1.00 cores: kube-apiserver 2.70, etcd 0.30" in text
    assert "kube-green" not in text and "gokubedownscaler" not in text


def test_the_cpu_table_takes_two_rounds_with_the_same_last_write(bench: ModuleType) -> None:
    trace = {"span_s": 2.5, "cpu_s": {"kube-apiserver": 2.0}}
    results = {"rounds": {"fivespot": [{"last_s": 2.51, "cpu_to_last": trace},
                                       {"last_s": 2.51, "cpu_to_last": dict(trace)}]}}
    assert "  fivespot: 2.50 s, 0.80 cores: kube-apiserver 2.00" in bench.cpu_table(results)
