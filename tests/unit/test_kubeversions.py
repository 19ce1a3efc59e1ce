"""The supported Kubernetes range: one table, picked by KUBERNETES_VERSION for the local control
plane, each minor built from its own wrapper module and cached apart, etcd shared."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from fivespot.devcluster import build
from fivespot.devcluster.__main__ import main as devcluster_main
from fivespot.policies import kubeversions


def test_the_supported_range_is_at_least_1_34_to_1_37_with_1_35_the_default() -> None:
    minors = [v.minor for v in kubeversions.SUPPORTED]
    assert minors[0] == "1.34" and minors[-1] == "1.37" and "1.35" in minors
    assert minors == sorted(minors, key=kubeversions.minor_number)
    assert kubeversions.DEFAULT.minor == "1.35"


@pytest.mark.parametrize("text", ["1.34", "v1.34", "1.34.4", " 1.34 "])
def test_a_minor_is_named_with_or_without_v_and_patch(text: str) -> None:
    assert kubeversions.resolve(text).minor == "1.34"


@pytest.mark.parametrize("text,number", [("1.29", (1, 29)), ("v1.34", (1, 34)), ("1.40.2", (1, 40))])
def test_any_minor_supported_or_not_reads_as_numbers_the_way_resolve_reads_it(
        text: str, number: tuple[int, int]) -> None:
    assert kubeversions.minor_number(text) == number
    known = kubeversions.BY_MINOR.get(f"1.{number[1]}")
    if known is not None:
        assert kubeversions.resolve(text).number == number == known.number


@pytest.mark.parametrize("text", ["2.0", "latest", "1", ""])
def test_text_that_is_not_a_version_is_refused_by_the_one_reading(text: str) -> None:
    with pytest.raises(kubeversions.UnsupportedVersion, match="is not MAJOR.MINOR"):
        kubeversions.minor_number(text)


@pytest.mark.parametrize("text", ["1.33", "1.38", "2.0", "latest", ""])
def test_a_version_outside_the_range_is_refused_naming_the_range(text: str) -> None:
    with pytest.raises(kubeversions.UnsupportedVersion, match="supported.* 1.34 to 1.37"):
        kubeversions.resolve(text)


def test_the_environment_variable_selects_the_control_planes_version(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_VERSION", raising=False)
    assert build.selected_version() is kubeversions.DEFAULT
    monkeypatch.setenv("KUBERNETES_VERSION", "1.37")
    assert build.selected_version().minor == "1.37"
    assert build.kubernetes_module().name == "kubernetes-1.37"
    assert build.pinned_versions().kubernetes == "v1.37.2"
    assert build.binaries_dir().name.startswith("k8s-v1.37.2_etcd-")


def test_an_unsupported_environment_version_is_a_build_error_naming_the_range(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KUBERNETES_VERSION", "1.30")
    with pytest.raises(build.BuildError, match=r"KUBERNETES_VERSION: Kubernetes 1.30 is not "
                                               r"supported: fivespot supports 1.34 to 1.37"):
        build.selected_version()
    assert devcluster_main(["build"]) == 2
    assert "1.34 to 1.37" in capsys.readouterr().err


def test_each_version_has_its_own_cache_folder_and_etcd_is_copied_not_rebuilt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIVESPOT_CACHE_DIR", str(tmp_path))
    old, new = kubeversions.BY_MINOR["1.35"], kubeversions.BY_MINOR["1.34"]
    built = build.binaries_dir(build.pinned_versions(old))
    built.mkdir(parents=True)
    (built / "etcd").write_text("etcd binary")
    folder = build.binaries_dir(build.pinned_versions(new))
    assert folder != built
    folder.mkdir(parents=True)
    for name in ("kube-apiserver", "kube-controller-manager"):
        (folder / name).write_text("")
    out = io.StringIO()
    found = build.ensure_binaries(out, version=new)
    assert found.etcd.read_text() == "etcd binary"
    assert "copied from" in out.getvalue() and "building" not in out.getvalue()
    assert build.cached_binaries(new) == found


def test_a_wrapper_without_a_toolchain_line_builds_with_the_local_go(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text("module x\n\ngo 1.26.0\n")
    assert build._toolchain(tmp_path) == "local"
    (tmp_path / "go.mod").write_text("module x\n\ngo 1.27.0\n\ntoolchain go1.27.4\n")
    assert build._toolchain(tmp_path) == "go1.27.4"


def test_devcluster_versions_lists_the_others_for_the_version_matrix(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("KUBERNETES_VERSION", raising=False)
    assert devcluster_main(["versions"]) == 0
    assert capsys.readouterr().out.split() == ["1.34", "1.35", "1.36", "1.37"]
    assert devcluster_main(["versions", "--others"]) == 0
    assert capsys.readouterr().out.split() == ["1.34", "1.36", "1.37"]
    monkeypatch.setenv("KUBERNETES_VERSION", "1.37")
    assert devcluster_main(["versions", "--others"]) == 0
    assert capsys.readouterr().out.split() == ["1.34", "1.35", "1.36"]


def test_the_cel_lists_extension_reaches_new_expressions_from_1_35() -> None:
    [lists] = kubeversions.CEL_LIBRARIES
    assert [v.minor for v in kubeversions.SUPPORTED if lists.offered_by(v)] == ["1.35", "1.36", "1.37"]
    assert lists.first_minor == "1.35"
