"""Webhook latency at a fixed request rate over TLS, against a no-op responder on the same stack.

Not a test: a measurement for bench/RESULTS.md (docs/design/numbers.md: p99 <= 10 ms at 200 requests/s on 2
cores, and within 2x of a no-op AdmissionReview responder measured in the same run).

What runs:
- a real control plane (kube-apiserver + etcd from devcluster) with the compiled example's CRDs
  and `--machines` ScheduledMachines in `agents`, so host governance reads a populated,
  watch-fed cache as in a cluster;
- the webhook, `python -m fivespot.webhook serve` (gunicorn, one event-driven uvicorn worker, TLS,
  keep-alive) with the example compiled as `enforcement: both`, so all three
  checks run;
- two no-op responders on the same `GunicornApplication`, settings and TLS context class: a
  Flask view that parses the review and answers allowed with its uid (the webhook's server
  stack minus the checks: the reference for the ratio), and the same as a bare WSGI app;
- a load generator (this process): `--connections` persistent TLS connections (keep-alive), an
  open-loop schedule of `--rate` requests/s spread over them, latency measured from each request's
  *scheduled* send time (so a stalled server is not hidden by a generator that waits for it).
  The mix: a third host-governance CREATEs (a ScheduledCapacity naming a node), a third
  target-guard UPDATEs (a pool's diff), a third VAP-polyfill CREATEs, allowed and denied.

Phases alternate no-op / webhook for `--rounds` rounds, each `--requests` requests after a
warm-up; everything is bounded in count and time and talks only to 127.0.0.1.

    .venv/bin/python bench/webhook/run.py [--rate 200] [--requests 3000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import platform
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402
from kubernetes import client  # noqa: E402

from fivespot.compiler.output import write_tree  # noqa: E402
from fivespot.compiler.pipeline import compile_repo  # noqa: E402
from fivespot.devcluster.build import cached_binaries, ensure_binaries  # noqa: E402
from fivespot.devcluster.clients import admin_client  # noqa: E402
from fivespot.devcluster.controlplane import ControlPlane  # noqa: E402
from fivespot.devcluster.kubectl import apply, wait_established  # noqa: E402
from fivespot.webhook.tls import issue, new_ca  # noqa: E402

EXAMPLE = ROOT / "examples" / "agent-sandbox"
CAPACITY = "system:serviceaccount:5spot-system:fivespot-capacity-controller"


# --- the no-op responder ---------------------------------------------------------------------


def noop_main(kind: str, port: int, cert: Path, key: Path) -> None:
    """Serve a no-op responder on the webhook's own gunicorn application and TLS context:
    `flask` is the webhook's whole server stack (Flask, gunicorn, TLS) minus the checks, the
    reference for the ratio; `wsgi` drops Flask too (what the framework itself costs)."""
    from flask import Flask, Response, request

    from fivespot.webhook.server import GunicornApplication, ServeOptions, use_serving
    from fivespot.webhook.serving import ServingCertificate

    options = ServeOptions(bundle_path=Path("/dev/null"), port=port, bind="127.0.0.1",
                           certificate_mode="files", tls_cert=cert, tls_key=key)

    def answer(body: bytes) -> bytes:
        review = json.loads(body)
        return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "response": {"uid": review["request"]["uid"], "allowed": True}},
                          separators=(",", ":")).encode()

    def wsgi(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        size = int(environ.get("CONTENT_LENGTH") or 0)
        body = answer(environ["wsgi.input"].read(size)) if size else b"{}"
        start_response("200 OK", [("Content-Type", "application/json"),
                                  ("Content-Length", str(len(body)))])
        return [body]

    flask = Flask("noop")

    @flask.post("/validate/<check>")
    def validate(check: str) -> Response:
        return Response(answer(request.get_data()), mimetype="application/json")

    @flask.get("/readyz")
    def readyz() -> Response:
        return Response("ok\n", mimetype="text/plain")

    def factory() -> Any:
        serving = ServingCertificate()
        serving.load(cert.read_bytes(), key.read_bytes())
        use_serving(serving)
        return flask if kind == "flask" else wsgi

    GunicornApplication(options, cert, key, factory, options.limits(5)).run()


# --- the requests ----------------------------------------------------------------------------


def _scap(i: int, node: str, namespace: str = "agents") -> dict[str, Any]:
    return {"apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
            "metadata": {"name": f"cap-{i}", "namespace": namespace},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": "window"},
                     "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                                   "kind": "VirtualMachinePool", "name": "sandboxes"},
                     "capacity": {"path": "spec.warmReplicas", "activeValue": 4 + i % 9},
                     "nodeName": node}}


def _pool(warm: int, team: str) -> dict[str, Any]:
    return {"apiVersion": "pools.agents.example.com/v1alpha1", "kind": "VirtualMachinePool",
            "metadata": {"name": "sandboxes", "namespace": "agents", "labels": {"team": team},
                         "resourceVersion": str(100 + warm), "generation": warm},
            "spec": {"warmReplicas": warm, "template": {"image": "sandbox:1", "cpu": 2}},
            "status": {"inUse": 1}}


def requests_mix(count: int, machines: int) -> list[tuple[str, bytes]]:
    scap_resource = {"group": "5spot.finos.org", "version": "v1alpha1",
                     "resource": "scheduledcapacities"}
    pool_resource = {"group": "pools.agents.example.com", "version": "v1alpha1",
                     "resource": "virtualmachinepools"}
    out = []
    for i in range(count):
        kind = i % 3
        if kind == 0:  # host governance: every 4th names a governed node
            node = f"node-{i % machines}" if i % 4 == 0 else f"free-{i}"
            request = {"operation": "CREATE", "namespace": "agents", "resource": scap_resource,
                       "userInfo": {"username": "alice"}, "object": _scap(i, node)}
            path = "/validate/host-governance"
        elif kind == 1:  # target guard: every 5th also changes a label
            request = {"operation": "UPDATE", "namespace": "agents", "name": "sandboxes",
                       "resource": pool_resource, "userInfo": {"username": CAPACITY},
                       "object": _pool(i % 30, "b" if i % 5 == 0 else "a"),
                       "oldObject": _pool((i + 1) % 30, "a")}
            path = "/validate/target-guard"
        else:  # polyfill: every 4th is outside the tenant namespaces
            namespace = "team-b" if i % 4 == 0 else "agents"
            request = {"operation": "CREATE", "namespace": namespace, "resource": scap_resource,
                       "userInfo": {"username": "alice"}, "object": _scap(i, f"free-{i}", namespace)}
            path = "/validate/vap-polyfill"
        request.update(uid=f"uid-{i}", kind={"group": "", "version": "v1", "kind": "X"})
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "request": request}).encode()
        out.append((path, body))
    return out


# --- the load generator ----------------------------------------------------------------------


def run_phase(port: int, trust: ssl.SSLContext, work: list[tuple[str, bytes]], rate: float,
              connections: int, time_cap_s: float) -> dict[str, Any]:
    """Open-loop: request i is due at start + i/rate on connection i % connections."""
    latencies: list[list[float]] = [[] for _ in range(connections)]
    by_path: dict[str, list[float]] = {}
    errors: list[str] = []
    lock = threading.Lock()
    start = time.perf_counter() + 0.2
    deadline = start + time_cap_s

    def lane(j: int) -> None:
        connection = http.client.HTTPSConnection("127.0.0.1", port, context=trust, timeout=10)
        for i in range(j, len(work), connections):
            due = start + i / rate
            now = time.perf_counter()
            if now > deadline:
                with lock:
                    errors.append("time cap reached")
                break
            if due > now:
                time.sleep(due - now)
            path, body = work[i]
            try:
                connection.request("POST", path, body=body,
                                   headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                payload = response.read()
                ok = response.status == 200 and b'"allowed"' in payload
            except OSError as error:
                ok, payload = False, repr(error).encode()
                connection.close()
                connection = http.client.HTTPSConnection("127.0.0.1", port, context=trust,
                                                         timeout=10)
            elapsed = time.perf_counter() - due
            latencies[j].append(elapsed)
            with lock:
                by_path.setdefault(path, []).append(elapsed)
                if not ok:
                    errors.append(payload[:200].decode(errors="replace"))
        connection.close()

    threads = [threading.Thread(target=lane, args=(j,)) for j in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    flat = sorted(x for lane_latencies in latencies for x in lane_latencies)
    wall = time.perf_counter() - start
    return {"summary": summarize(flat), "achieved_rate": len(flat) / wall, "errors": errors,
            "by_path": {p: summarize(sorted(v)) for p, v in by_path.items()}}


def decision_buckets(metrics_port: int) -> dict[float, float]:
    """The webhook's own decision-time histogram (all checks and verdicts), cumulative, from its
    metrics port (the serving port does not serve them)."""
    connection = http.client.HTTPConnection("127.0.0.1", metrics_port, timeout=10)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    connection.close()
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith("fivespot_webhook_admission_duration_seconds_bucket{"):
            labels, value = line.rsplit(" ", 1)
            bound = labels.split('le="', 1)[1].split('"', 1)[0]
            key = float("inf") if bound == "+Inf" else float(bound)
            buckets[key] = buckets.get(key, 0.0) + float(value)
    return buckets


def bucket_quantile(before: dict[float, float], after: dict[float, float], q: float) -> float:
    """The upper bound (ms) of the bucket holding quantile q of the requests in between."""
    counts = sorted((bound, after[bound] - before.get(bound, 0.0)) for bound in after)
    total = counts[-1][1]
    for bound, cumulative in counts:
        if cumulative >= q * total:
            return bound * 1000
    return float("inf")


def cpu_seconds(group: int) -> float:
    """CPU time (user + system) of every process in a process group, from /proc."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group:  # pgrp
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def summarize(values: list[float]) -> dict[str, float]:
    def pct(q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))] * 1000

    return {"n": len(values), "p50": pct(0.50), "p90": pct(0.90), "p99": pct(0.99),
            "max": values[-1] * 1000}


# --- setup -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_ready(port: int, trust: ssl.SSLContext, path: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPSConnection("127.0.0.1", port, context=trust, timeout=2)
            connection.request("GET", path)
            if connection.getresponse().status == 200 or path != "/readyz":
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"nothing answered on port {port}")


def prepare_cluster(kubeconfig: Path, work: Path, machines: int) -> Path:
    config = work / "config"
    shutil.copytree(EXAMPLE / "config", config)
    platform_doc = yaml.safe_load((config / "platform.yaml").read_text())
    platform_doc["spec"]["enforcement"] = "both"
    (config / "platform.yaml").write_text(yaml.safe_dump(platform_doc))
    compiled = compile_repo(config)
    write_tree(compiled.files, work / "out")
    apply(kubeconfig, work / "out" / "crds")
    wait_established(kubeconfig, ["scheduledmachines.5spot.finos.org"])
    api = admin_client(kubeconfig)
    core, objects = client.CoreV1Api(api), client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": "agents"}})
    for i in range(machines):
        name = f"sm-{i}"
        objects.create_namespaced_custom_object("5spot.finos.org", "v1beta1", "agents",
                                                "scheduledmachines", {
            "apiVersion": "5spot.finos.org/v1beta1", "kind": "ScheduledMachine",
            "metadata": {"name": name},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": "w"}}})
        objects.patch_namespaced_custom_object_status(
            "5spot.finos.org", "v1beta1", "agents", "scheduledmachines", name,
            {"status": {"nodeRef": {"name": f"node-{i}"}}})
    api.close()
    return work / "out" / "bundle.json"


def spawn(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as handle:
        return subprocess.Popen(argv, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT,
                                start_new_session=True)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--requests", type=int, default=3000, help="per phase")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--machines", type=int, default=200)
    parser.add_argument("--noop", nargs=4, metavar=("KIND", "PORT", "CERT", "KEY"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.noop:
        noop_main(args.noop[0], int(args.noop[1]), Path(args.noop[2]), Path(args.noop[3]))
        return 0

    load_at_start = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="fivespot-bench-webhook-"))
    plane = ControlPlane(cached_binaries() or ensure_binaries(), owned=True)
    plane.start()
    processes: list[subprocess.Popen[bytes]] = []
    try:
        bundle = prepare_cluster(plane.kubeconfig, work, args.machines)
        now = datetime.datetime.now(datetime.timezone.utc)
        ca, ca_key = new_ca("bench-ca", now)
        serving = issue(ca, ca_key, "fivespot-webhook", now, ip_addresses=("127.0.0.1",),
                        server=True)
        cert, key = work / "tls.crt", work / "tls.key"
        cert.write_bytes(serving.cert_pem)
        key.write_bytes(serving.key_pem)
        trust = ssl.create_default_context(cadata=ca.cert_pem.decode())
        ports = {"noop-wsgi": free_port(), "noop": free_port(), "webhook": free_port()}
        webhook_port, metrics_port = ports["webhook"], free_port()
        groups: dict[str, int] = {}  # server -> process group (each is its own session)
        processes.append(spawn([sys.executable, "-m", "fivespot.webhook", "serve", "--bundle", str(bundle),
                                "--port", str(webhook_port), "--bind", "127.0.0.1",
                                "--kubeconfig", str(plane.kubeconfig), "--tls-cert", str(cert),
                                "--tls-key", str(key), "--certificate-mode", "files",
                                "--metrics-port", str(metrics_port)], work / "webhook.log"))
        groups["webhook"] = processes[-1].pid
        for name, kind in (("noop", "flask"), ("noop-wsgi", "wsgi")):
            processes.append(spawn([sys.executable, str(Path(__file__).resolve()), "--noop",
                                    kind, str(ports[name]), str(cert), str(key)],
                                   work / f"{name}.log"))
            groups[name] = processes[-1].pid
        for port in ports.values():
            wait_ready(port, trust, "/readyz")
        time.sleep(2)  # let the cache sync and the servers settle
        mix = requests_mix(args.requests, args.machines)
        warmup = requests_mix(300, args.machines)
        cap = args.requests / args.rate * 3 + 30
        rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in ports}
        names = list(ports)
        for round_number in range(args.rounds):
            # Rotate the order each round so no server always runs in the same slot of the
            # machine's (shared, noisy) load.
            for name in names[round_number % 3:] + names[:round_number % 3]:
                port = ports[name]
                run_phase(port, trust, warmup, args.rate, args.connections, cap)
                before = decision_buckets(metrics_port) if name == "webhook" else {}
                cpu_before = cpu_seconds(groups[name])
                result = run_phase(port, trust, mix, args.rate, args.connections, cap)
                result["cpu_ms_per_request"] = (cpu_seconds(groups[name]) - cpu_before) * 1000 \
                    / max(result["summary"]["n"], 1)
                if name == "webhook":
                    after = decision_buckets(metrics_port)
                    result["decision"] = {q: bucket_quantile(before, after, q)
                                          for q in (0.5, 0.99)}
                rounds[name].append(result)
                s = result["summary"]
                print(f"round {round_number + 1} {name:7s}: n={s['n']} p50={s['p50']:.2f} ms "
                      f"p99={s['p99']:.2f} ms max={s['max']:.2f} ms "
                      f"rate={result['achieved_rate']:.0f}/s "
                      f"cpu={result['cpu_ms_per_request']:.2f} ms/request "
                      f"errors={len(result['errors'])}",
                      flush=True)
                for error in result["errors"][:3]:
                    print("   error:", error)
        report(args, rounds, load_at_start)
    finally:
        for process in processes:
            stop(process)
        plane.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


def report(args: argparse.Namespace, rounds: dict[str, list[dict[str, Any]]],
           load_at_start: tuple[float, float, float]) -> None:
    def stat(name: str, key: str) -> tuple[float, float, float]:
        values = [r["summary"][key] for r in rounds[name]]
        return statistics.median(values), min(values), max(values)

    lines = [f"Machine: {platform.node() or 'vm'}, {platform.machine()}, {os.cpu_count()} CPUs, "
             f"Python {platform.python_version()}, load average "
             f"{', '.join(f'{x:.2f}' for x in load_at_start)} at start.",
             f"Command: `.venv/bin/python bench/webhook/run.py --rate {args.rate:g} --requests "
             f"{args.requests} --rounds {args.rounds} --connections {args.connections} "
             f"--machines {args.machines}`", "",
             "| server | p50 ms | p99 ms | max ms |", "|---|---:|---:|---:|"]
    for name in ("noop-wsgi", "noop", "webhook"):
        cells = []
        for key in ("p50", "p99", "max"):
            median, low, high = stat(name, key)
            cells.append(f"{median:.2f} ({low:.2f}–{high:.2f})")
        lines.append(f"| {name} | {' | '.join(cells)} |")
    p99_ratios = [w["summary"]["p99"] / n["summary"]["p99"]
                  for w, n in zip(rounds["webhook"], rounds["noop"])]
    p50_ratios = [w["summary"]["p50"] / n["summary"]["p50"]
                  for w, n in zip(rounds["webhook"], rounds["noop"])]
    lines += ["", "noop: Flask + gunicorn + TLS answering allowed (the reference); noop-wsgi: "
              "the same without Flask", f"webhook / no-op, same round: p99 ratio median {statistics.median(p99_ratios):.2f}× "
              f"(min {min(p99_ratios):.2f}, max {max(p99_ratios):.2f}); p50 ratio median "
              f"{statistics.median(p50_ratios):.2f}×"]
    per_path: dict[str, list[float]] = {}
    for result in rounds["webhook"]:
        for path, summary in result["by_path"].items():
            per_path.setdefault(path, []).append(summary["p99"])
    lines.append("webhook p99 by check (median of rounds): " + ", ".join(
        f"{p.rsplit('/', 1)[-1]} {statistics.median(v):.2f} ms"
        for p, v in sorted(per_path.items())))
    cpu = {name: statistics.median(r["cpu_ms_per_request"] for r in rounds[name])
           for name in rounds}
    lines.append("server CPU per request (user+system of its processes, median of rounds): "
                 + ", ".join(f"{name} {value:.2f} ms" for name, value in cpu.items())
                 + f"; webhook / noop {cpu['webhook'] / cpu['noop']:.2f}×")
    decided = [r["decision"] for r in rounds["webhook"]]
    lines.append("webhook decision time inside the app (its own histogram; bucket upper bounds), "
                 "per round: " + ", ".join(f"p50 <= {d[0.5]:g} ms, p99 <= {d[0.99]:g} ms"
                                           for d in decided))
    errors = sum(len(r["errors"]) for rs in rounds.values() for r in rs)
    lines.append(f"errors: {errors}")
    print("\n" + "\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
