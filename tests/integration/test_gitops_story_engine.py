"""The whole story a platform team lives, with real Argo CD and every fivespot component running
(the compiled Deployments' pods on tests/integration/kubelet.py's node, from the built image):

1. `fivespot init` makes the config repo; its CI step is the shipped pre-commit hooks
   (examples/ci/pre-commit-config.yaml, the hooks of .pre-commit-hooks.yaml, installed as the
   repo's git hook, run by `git commit` as on a developer's machine); the compiled output is
   committed with the config and pushed to the repository Argo CD watches; the docs' Argo CD
   steps; the Application reaches Synced / Healthy.
2. A commit tightening the tenant's TenantPolicy (and its fixtures with it): once the engine has
   synced it, a ScheduledCapacity that was admitted before is denied at admission. The time from
   the push to the first denial is printed (bench/gitops measures it properly).
3. Commits with a bad config are stopped by the hooks: the watched repository never sees them.
4. An upgrade commit — a new consumer, a tighter limit, a new provider — syncs while a tenant
   creates ScheduledCapacities every 100 ms: none is refused.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

from fivespot.compiler.scaffold import init
from fivespot.devcluster.gitops_engines import ArgoCD
from fivespot.runtime import kube
from tests.integration.gitops_world import (
    FetchRetry,
    Node,
    WatchedRepo,
    Writer,
    apply_argocd_objects,
    application,
    custom_path,
    edit_platform,
    engine_world,
    eventually,
    get_or_none,
    git,
    refresh,
    start_argocd,
    synced_at,
    describe_application,
)
from tests.unit.test_ci_templates import _local_hooks

pytestmark = [pytest.mark.timeout(2400), pytest.mark.engines]

TEAM: Final = "team-a"
SCAP: Final = ("5spot.finos.org", "v1alpha1", "scheduledcapacities")
SYNC_TIMEOUT_S: Final = 600.0


def team_scap(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
            "metadata": {"name": name, "namespace": TEAM},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": "web"},
                     "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "capacity": {"path": "spec.replicas", "activeValue": value}}}


def admission(api: Any, value: int) -> str | None:
    """None if a ScheduledCapacity asking for `value` is admitted (dry run), else the refusal."""
    body = team_scap(f"probe-{value}-{time.monotonic_ns() % 10**8}", value)
    try:
        kube.request(api, "POST", custom_path(SCAP, TEAM), body=body, query={"dryRun": "All"})
    except kube.ApiError as error:
        return error.message
    return None


@dataclass
class Story:
    node: Node
    argocd: ArgoCD
    repo: WatchedRepo
    home: Path
    revisions: list[str]

    @property
    def api(self) -> Any:
        return self.node.api

    @property
    def config(self) -> Path:
        return self.repo.tree / "config"

    def commit(self, message: str) -> Any:
        """`git commit -a`-like, as a developer commits: the pre-commit hook runs first."""
        git(self.repo.tree, "add", "-A")
        return git(self.repo.tree, "commit", "-q", "-m", message, check=False,
                   env={"PRE_COMMIT_HOME": str(self.home)})

    def wait_synced(self, revision: str) -> dict[str, Any]:
        retry = FetchRetry(self.api, "fivespot", self.repo.url)

        def done() -> dict[str, Any] | None:
            self.argocd.check()
            app = application(self.api)
            retry(app)
            return app if synced_at(app, revision) else None

        return eventually(done, SYNC_TIMEOUT_S, f"Synced / Healthy at {revision}",
                          lambda: describe_application(application(self.api))
                          + "\ngit server:\n" + self.repo.server.log_tail(), every_s=1.0)


@pytest.fixture(scope="module")
def story(built_image: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    work = tmp_path_factory.mktemp("story")
    with engine_world(built_image, work, start_argocd) as (node, server, argocd):
        repo = WatchedRepo.create(server, "platform-config", work)
        kube.request(node.api, "POST", "/api/v1/namespaces", body={"metadata": {"name": TEAM}})
        yield Story(node, argocd, repo, work / "pre-commit-home", [])


def _replace(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert old in text, f"{path}: no {old!r}"
    path.write_text(text.replace(old, new, count))


def test_a_fivespot_init_repo_with_its_ci_hooks_syncs_to_synced_and_healthy(story: Story) -> None:
    tree = story.repo.tree
    init(story.config)
    edit_platform(story.config, gitops={"argocd": {"repoURL": story.repo.url,
                                                   "path": "clusters/prod/fivespot"}})
    story.repo.compile()
    _local_hooks(tree)
    _install_hook(tree, story.home)
    first = story.commit("fivespot: a new config repo, compiled")
    assert first.returncode == 0, first.stdout + first.stderr
    revision = story.repo.push()
    started = time.monotonic()
    apply_argocd_objects(story.node.kubeconfig, story.repo.out)
    story.wait_synced(revision)
    print(f"story: init repo Synced/Healthy {time.monotonic() - started:.0f}s after the Application")
    story.revisions.append(revision)
    assert admission(story.api, 3) is None


def _install_hook(tree: Path, home: Path) -> None:
    """`pre-commit install`: from now on `git commit` runs the hooks first."""
    done = subprocess.run([str(Path(sys.executable).parent / "pre-commit"), "install"], cwd=tree,
                          capture_output=True, text=True,
                          env={**os.environ, "PRE_COMMIT_HOME": str(home)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tree / ".git" / "hooks" / "pre-commit").is_file()


def test_a_tightened_tenant_policy_is_in_force_at_admission_once_argo_cd_has_synced_it(
        story: Story) -> None:
    assert story.revisions, "the init story runs first"
    _replace(story.config / "tenants.yaml", "maxActiveValue: 10", "maxActiveValue: 2")
    fixtures = story.config / "fixtures" / "fixtures.yaml"
    _replace(fixtures, "activeValue: 3}", "activeValue: 2}")  # the allowed fixture, within the limit
    story.repo.compile()
    done = story.commit("team-a: at most 2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert admission(story.api, 3) is None, "3 is still within the limit in force"
    pushed = time.monotonic()
    revision = story.repo.push()
    refresh(story.api)  # what a git server's webhook to Argo CD triggers
    denied = eventually(lambda: admission(story.api, 3), SYNC_TIMEOUT_S,
                        "a ScheduledCapacity over the new limit denied",
                        lambda: describe_application(application(story.api)), every_s=0.2)
    print(f"story: push to policy enforced (Argo CD, refresh annotation): "
          f"{time.monotonic() - pushed:.1f}s")
    assert "activeValue" in denied or "maxActiveValue" in denied or "2" in denied, denied
    story.wait_synced(revision)
    story.revisions.append(revision)
    assert admission(story.api, 2) is None


def test_commits_with_a_bad_config_never_reach_the_watched_repository(story: Story) -> None:
    before = story.repo.remote_head()
    try:
        _replace(story.config / "tenants.yaml", "maxActiveValue: 2", 'maxActiveValue: "two"')
        refused = story.commit("team-a: a limit that is not a number")
        said = refused.stdout + refused.stderr
        assert refused.returncode != 0, said
        assert "fivespot compile --check" in said and "Failed" in said, said
        assert "Input should be a valid integer" in said, said
        git(story.repo.tree, "reset", "-q", "--hard")

        # expects 3 allowed: no longer true since the limit is 2
        _replace(story.config / "fixtures" / "fixtures.yaml", "activeValue: 2}", "activeValue: 3}")
        failing = story.commit("fixtures: a wrong expectation")
        said = failing.stdout + failing.stderr
        assert failing.returncode != 0, said
        assert "team-a-scales-its-deployment-allowed" in said, said
    finally:
        git(story.repo.tree, "reset", "-q", "--hard")

    assert story.repo.head() == story.revisions[-1] == before == story.repo.remote_head()
    refresh(story.api)
    time.sleep(3)
    assert application(story.api)["status"]["sync"]["revision"] == before


def test_an_upgrade_commit_syncs_with_no_refused_write(story: Story) -> None:
    consumers = story.config / "consumers.yaml"
    consumers.write_text(consumers.read_text() + """---
apiVersion: config.5spot.finos.org/v1alpha1
kind: CapacityConsumer
metadata:
  name: statefulsets
spec:
  group: apps
  version: v1
  kind: StatefulSet
  resource: statefulsets
  capacityPaths: [spec.replicas]
  drainedPath: status.readyReplicas
  maxActiveValue: 20
""")
    _replace(story.config / "tenants.yaml", "consumers: [deployments]",
             "consumers: [deployments, statefulsets]")
    _replace(story.config / "tenants.yaml", "maxActiveValue: 2", "maxActiveValue: 1")
    _replace(story.config / "fixtures" / "fixtures.yaml", "activeValue: 2}", "activeValue: 1}")
    _replace(story.config / "providers.yaml", "    - TimeBasedSpotSchedule",
             "    - TimeBasedSpotSchedule\n    - CompositeSchedule")
    story.repo.compile()
    done = story.commit("fivespot: statefulsets, team-a at most 1, CompositeSchedule")
    assert done.returncode == 0, done.stdout + done.stderr

    writer = Writer(story.api, body=lambda name: team_scap(name, 1)).start()
    try:
        time.sleep(1)
        revision = story.repo.push()
        refresh(story.api)
        app = story.wait_synced(revision)
        time.sleep(2)
    finally:
        writer.stop()
    assert writer.refused == [], writer.refused[:5]
    assert writer.attempts > 20
    kinds = {(r["kind"], r["name"]) for r in app["status"]["resources"]}
    assert ("Deployment", "fivespot-provider-composite") in kinds
    assert ("CustomResourceDefinition", "compositeschedules.spotschedules.5spot.finos.org") in kinds
    deployment = kube.request(story.api, "GET", "/apis/apps/v1/namespaces/5spot-system/deployments/"
                                                "fivespot-provider-composite")
    assert deployment["status"].get("availableReplicas") == deployment["spec"]["replicas"]
    assert admission(story.api, 2) is not None, "the tighter limit is in force"
    statefulset = team_scap("db", 1)
    statefulset["spec"]["targetRef"] = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db"}
    kube.request(story.api, "POST", custom_path(SCAP, TEAM), body=statefulset, query={"dryRun": "All"})
    assert get_or_none(story.api, custom_path(SCAP, TEAM, "db")) is None  # a dry run stores nothing
