"""tools/engines/versions, the one place the GitOps engines' versions live: read as pinned, each
program's cache folder named after its line (a bumped pin builds afresh), and a bad line refused
with its file and line number instead of a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from fivespot.devcluster import engines
from fivespot.devcluster.engines import EngineBuildError, read_pins

pytestmark = pytest.mark.unit

GOOD = """\
# name  module@version  go  edits
argocd                github.com/argoproj/argo-cd/v3@v3.6.2          go1.27.4
source-controller     github.com/fluxcd/source-controller@v1.9.6     local  replace=a/b=a/b@v0.1.0
kustomize-controller  github.com/fluxcd/kustomize-controller@v1.9.6  local
kustomize             sigs.k8s.io/kustomize/kustomize/v5@v5.8.2      local
redis                 debian:redis-server                            -
"""


def _pins(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "versions"
    path.write_text(text)
    return path


def test_the_repos_pins_name_every_engine_at_the_versions_the_notes_could_build() -> None:
    pins = read_pins()
    assert set(pins) == set(engines.NAMES)
    assert (pins["argocd"].version, pins["argocd"].toolchain) == ("v3.6.2", "go1.27.4")
    assert pins["source-controller"].replaces == (
        "github.com/fluxcd/pkg/artifact=github.com/fluxcd/pkg/artifact@v0.18.0",)
    assert pins["kustomize-controller"].version == "v1.9.6"
    assert pins["kustomize"].version == "v5.8.2"


def test_each_programs_cache_folder_changes_with_its_version_toolchain_and_edits(tmp_path: Path) -> None:
    pins = read_pins(_pins(tmp_path, GOOD))
    assert pins["argocd"].folder_name == "argocd-v3.6.2_go1.27.4"
    assert pins["kustomize"].folder_name == "kustomize-v5.8.2"
    bumped = read_pins(_pins(tmp_path, GOOD.replace("v5.8.2", "v5.8.3").replace("a/b@v0.1.0", "a/b@v0.2.0")))
    assert bumped["kustomize"].folder_name == "kustomize-v5.8.3"
    assert bumped["source-controller"].folder_name != pins["source-controller"].folder_name
    assert bumped["argocd"].folder_name == pins["argocd"].folder_name


@pytest.mark.parametrize(("old", "new", "message"), [
    ("github.com/argoproj/argo-cd/v3@v3.6.2", "github.com/argoproj/argo-cd/v3",
     "is not module@vX.Y.Z"),
    ("go1.27.4", "1.27", "the go column is `local` or a version such as go1.27.4"),
    ("replace=a/b=a/b@v0.1.0", "drop=a/b", "an edit is replace=OLD=NEW"),
    ("kustomize             sigs.k8s.io/kustomize/kustomize/v5@v5.8.2      local\n", "", "no line for kustomize"),
    ("redis                 debian:redis-server                            -", "redis",
     "expected `name module@version go [edits]`"),
], ids=["no-version", "toolchain", "edit", "missing", "short"])
def test_a_bad_pin_is_refused_naming_the_file_and_line(tmp_path: Path, old: str, new: str,
                                                       message: str) -> None:
    path = _pins(tmp_path, GOOD.replace(old, new))
    with pytest.raises(EngineBuildError) as raised:
        read_pins(path)
    assert message in str(raised.value)
    assert str(path) in str(raised.value)


def test_a_cache_missing_one_program_is_not_complete_so_it_gets_built(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`cached_engines` is None unless every program and manifest is there: the tests and
    `make engines` then build what is missing (never skip it)."""
    monkeypatch.setenv("FIVESPOT_CACHE_DIR", str(tmp_path))
    layout = engines._layout(read_pins())
    for program in layout.programs():
        program.parent.mkdir(parents=True, exist_ok=True)
        program.write_text("")
    for name in engines.ARGOCD_PROGRAMS:
        (layout.argocd_bin / name).write_text("")
    for folder in (layout.argocd_crds, layout.argocd_base_config):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "kustomization.yaml").write_text("")
    for folder in layout.flux_crds:
        folder.mkdir(parents=True, exist_ok=True)
    layout.argocd_controller_statefulset.write_text("")
    assert engines.cached_engines() == layout
    layout.argocd_controller_statefulset.unlink()
    assert engines.cached_engines() is None
    layout.argocd_controller_statefulset.write_text("")
    layout.kustomize.unlink()
    assert engines.cached_engines() is None
