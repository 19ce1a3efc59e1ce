"""tools/peers/versions, the one place the peers' versions live (`make bench-peers`): read by the
engines' own reader, each peer's cache folder named after its line, a missing peer built rather
than skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from fivespot.devcluster import peers
from fivespot.devcluster.engines import EngineBuildError, read_pins

pytestmark = pytest.mark.unit


def test_the_repos_pins_name_both_peers_at_the_versions_the_module_proxy_serves() -> None:
    pins = read_pins(peers.PINS, peers.NAMES)
    assert set(pins) == set(peers.NAMES)
    assert (pins["kube-green"].module, pins["kube-green"].version) == (
        "github.com/kube-green/kube-green", "v0.7.1")
    # The proxy refuses the mixed-case path github.com/caas-team/GoKubeDownscaler.
    assert (pins["gokubedownscaler"].module, pins["gokubedownscaler"].version) == (
        "github.com/caas-team/gokubedownscaler", "v1.3.4")
    assert all(pin.toolchain == "local" and not pin.replaces for pin in pins.values())


def test_a_pins_file_without_a_line_for_a_peer_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "versions"
    path.write_text("kube-green  github.com/kube-green/kube-green@v0.7.1  local\n")
    with pytest.raises(EngineBuildError) as raised:
        read_pins(path, peers.NAMES)
    assert "no line for gokubedownscaler" in str(raised.value)
    assert str(path) in str(raised.value)


def test_each_peer_has_its_main_package_and_its_own_cache_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIVESPOT_CACHE_DIR", str(tmp_path))
    layout = peers._layout(read_pins(peers.PINS, peers.NAMES))
    assert set(peers.PACKAGES) == set(peers.NAMES)
    assert layout.kube_green.parent.name == "kube-green-v0.7.1"
    assert layout.gokubedownscaler.parent.name == "gokubedownscaler-v1.3.4"
    assert layout.kube_green.parent.parent == tmp_path / "peers"


def test_a_cache_missing_the_sleepinfo_crd_is_not_complete_so_it_gets_built(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIVESPOT_CACHE_DIR", str(tmp_path))
    layout = peers._layout(read_pins(peers.PINS, peers.NAMES))
    for path in (*layout.programs(), layout.sleepinfo_crd):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    assert peers.cached_peers() == layout
    layout.sleepinfo_crd.unlink()
    assert peers.cached_peers() is None
