"""Benchmark: from a push to the config repo to the policy in force, with each real GitOps engine.

Not a test. What a platform team waits for after `git push`: a `fivespot init` repo, compiled
and synced by the engine from a git server on loopback, on a control plane where the compiled
Deployments really run (the built image on tests/integration/kubelet.py's node). Each round
commits the TenantPolicy's limit flipped between 10 and 2 (compiled, as CI would), pushes it,
fires the engine's reconcile trigger — what a git server's webhook would do instead of waiting
for the engine's poll — and times until a ScheduledCapacity asking for 3 gets the new verdict
at admission (a server-side dry run every 100 ms):

- **Argo CD** (v3.6.2): the `argocd.argoproj.io/refresh=normal` annotation on the Application
  (what its git webhook handler and `argocd app get --refresh` set); the sync is automated.
- **Flux** (v1.9.6): `reconcile.fluxcd.io/requestedAt` on the GitRepository (what `flux reconcile
  source git` and a Receiver set); the Kustomizations follow the new artifact, each layer after the
  one it depends on, re-checked every `--requeue-dependency` (Flux's default 30 s, or as given).

    .venv/bin/python bench/gitops/run.py [--engine argocd|flux|both] [--rounds 6]
                                         [--requeue-dependency 30s]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

TEAM = "team-a"


def _built_image() -> dict[str, Any]:
    from tests.integration.conftest import image_build_dir

    out = image_build_dir()
    subprocess.run([sys.executable, str(ROOT / "image" / "build.py"), "build", "--out", str(out),
                    "--reuse"], check=True, capture_output=True, text=True)
    fields = dict(line.split(" ", 1) for line in (out / "inputs.txt").read_text().splitlines())
    return {"layout": out / "oci", "tag": fields["image"].rsplit(":", 1)[1],
            "reference": fields["image"]}


def _verdict(api: Any) -> bool:
    """True when a ScheduledCapacity asking for 3 is denied at admission (dry run)."""
    from fivespot.runtime import kube
    from tests.integration.test_gitops_story_engine import team_scap

    body = team_scap(f"bench-{time.monotonic_ns() % 10**9}", 3)
    try:
        kube.request(api, "POST", f"/apis/5spot.finos.org/v1alpha1/namespaces/{TEAM}/scheduledcapacities",
                     body=body, query={"dryRun": "All"})
    except kube.ApiError as error:
        if error.status in (400, 403, 422):
            return True
        raise
    return False


def _set_limit(config: Path, limit: int) -> None:
    path = config / "tenants.yaml"
    lines = [f"  maxActiveValue: {limit}" if line.startswith("  maxActiveValue:") else line
             for line in path.read_text().splitlines()]
    path.write_text("\n".join(lines) + "\n")


def _spread(values: list[float]) -> str:
    return (f"median {statistics.median(values):.1f} s (min {min(values):.1f}, "
            f"max {max(values):.1f}, n={len(values)})")


def run_engine(engine: str, rounds: int, requeue: str, image: dict[str, Any]) -> list[float]:
    from fivespot.compiler.scaffold import init
    from fivespot.devcluster.gitops_engines import ArgoCD, Flux
    from fivespot.devcluster.gitserver import GitServer
    from fivespot.devcluster.kubectl import kubectl
    from fivespot.runtime import kube
    from tests.integration.gitops_world import (
        GIT_REPOSITORIES, WatchedRepo, application, apply_argocd_objects, cluster, edit_platform,
        engines, eventually, refresh, request_reconcile, synced_at)

    times: list[float] = []
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="fivespot-bench-gitops-") as tmp:
        work = Path(tmp)
        node = stack.enter_context(cluster(image))
        server = GitServer(work / "git").start()
        stack.callback(server.stop)
        repo = WatchedRepo.create(server, "platform-config", work)
        kube.request(node.api, "POST", "/api/v1/namespaces", body={"metadata": {"name": TEAM}})
        init(work / "config")
        edit_platform(work / "config", gitops={
            "argocd": {"repoURL": repo.url, "path": "clusters/prod/fivespot"},
            "flux": {"url": repo.url, "ref": "main", "sourceRef": {"name": "platform-config"},
                     "path": "./clusters/prod/fivespot"}})
        revision = repo.publish(work / "config", "fivespot: init")
        trigger: Callable[[], None]
        if engine == "argocd":
            argocd = ArgoCD(engines(), node.kubeconfig, work / "argocd").start()
            stack.callback(argocd.stop)
            apply_argocd_objects(node.kubeconfig, repo.out)
            eventually(lambda: synced_at(application(node.api), revision), 900, "the first sync")

            def trigger() -> None:
                refresh(node.api)
        else:
            flux = Flux(engines(), node.kubeconfig, work / "flux", requeue_dependency=requeue).start()
            stack.callback(flux.stop)
            kubectl(node.kubeconfig, "apply", "-k", str(repo.out / "flux"))
            eventually(lambda: _flux_ready(node.api, revision), 900, "the first sync")

            def trigger() -> None:
                request_reconcile(node.api, GIT_REPOSITORIES, "platform-config")
        assert not _verdict(node.api)
        for round_ in range(rounds):
            limit = 2 if round_ % 2 == 0 else 10
            _set_limit(work / "config", limit)
            repo.write_config(work / "config")
            repo.compile()
            repo.commit(f"team-a: at most {limit}")
            started = time.monotonic()
            repo.push()
            trigger()
            eventually(lambda: _verdict(node.api) == (limit == 2), 900, "the new verdict",
                       every_s=0.1)
            elapsed = time.monotonic() - started
            times.append(elapsed)
            print(f"  {engine} round {round_ + 1}: limit {limit} in force {elapsed:.1f} s after the push",
                  flush=True)
            if engine == "argocd":  # the next round starts from a finished sync
                head = repo.head()
                eventually(lambda: synced_at(application(node.api), head), 900, "the sync to finish")
            else:
                head = repo.head()
                eventually(lambda: _flux_ready(node.api, head), 900, "every layer Ready")
    return times


def _flux_ready(api: Any, revision: str) -> bool:
    from tests.integration.gitops_world import KUSTOMIZATIONS, condition, get_or_none, custom_path

    found = get_or_none(api, custom_path(KUSTOMIZATIONS, "flux-system", "fivespot"))
    return (condition(found, "Ready").get("status") == "True" and found is not None
            and found["status"].get("lastAppliedRevision") == f"main@sha1:{revision}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("argocd", "flux", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--requeue-dependency", default="30s",
                        help="Flux's --requeue-dependency (its default: 30s)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be 1 or more")
    print(f"machine: {os.cpu_count()} cores, {platform.machine()}, load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    image = _built_image()
    results = {}
    for engine in (("argocd", "flux") if args.engine == "both" else (args.engine,)):
        started = time.monotonic()
        results[engine] = run_engine(engine, args.rounds, args.requeue_dependency, image)
        print(f"{engine}: push to policy in force: {_spread(results[engine])} "
              f"(whole run {time.monotonic() - started:.0f} s)", flush=True)
    print(f"load average at the end {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
