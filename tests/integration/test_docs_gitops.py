"""The tutorial's second part (docs/tutorial/gitops.md), every command as written, against real
Argo CD: the part-1 config repo, committed with its output and pushed to a git server, handed to
Argo CD, which syncs it wave by wave onto a control plane whose node runs the built image; a
tenant's ScheduledCapacity then flips a Deployment, and a tightened TenantPolicy pushed by a commit
hands it back to 0 until the object asks for what the new policy allows.

Runs with the `engines` tests, after every other integration test (the engines are built by
`make engines`, the image by the session's `built_image`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fivespot.devcluster.gitserver import GitServer
from tests.integration.docs_commands import DOCS, run_page, up_to_the_first_background_block
from tests.integration.gitops_world import GIT_IDENTITY_ENV, Node, engine_world, start_argocd

pytestmark = [pytest.mark.timeout(2400), pytest.mark.engines]


@pytest.fixture(scope="module")
def argocd_cluster(built_image: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[tuple[Node, GitServer]]:
    work = tmp_path_factory.mktemp("docs-gitops")
    with engine_world(built_image, work, start_argocd) as (node, server, _):
        server.create("cluster-config")
        yield node, server


def test_the_tutorials_argo_cd_part_runs_as_written(argocd_cluster: tuple[Node, GitServer],
                                                     tmp_path: Path) -> None:
    node, server = argocd_cluster
    part_one = up_to_the_first_background_block(DOCS / "tutorial" / "index.md")
    run_page(DOCS / "tutorial" / "gitops.md", tmp_path, before=part_one, env=GIT_IDENTITY_ENV,
             settings={"REPO_URL": server.url("cluster-config"), "KUBECONFIG": str(node.kubeconfig),
                       "API_SERVER_CIDR": "10.0.0.0/8"})
