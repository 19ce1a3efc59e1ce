"""`fivespot compile` targets the Platform's Kubernetes range: a CRD rule is priced as each
targeted API server prices it and refused naming the versions that refuse it, only CEL libraries
every targeted version offers may be called, the range is checked, and the output names it so
`fivespot check` decides as its newest version."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from fivespot.compiler import cel_preflight
from fivespot.cli.main import main as fivespot
from fivespot.compiler.compile_warnings import untested_kubernetes
from fivespot.compiler.repo import Repo
from fivespot.compiler.spec import Platform
from fivespot.policies import kubeversions
from tests.kubeversion_rules import LISTS_RULE, NAME_RULE, crd_with_rule

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent-sandbox" / "config"

def platform(**spec: Any) -> Platform:
    return Platform.model_validate({"apiVersion": "config.5spot.finos.org/v1alpha1",
                                    "kind": "Platform", "metadata": {"name": "platform"},
                                    "spec": {"image": "example/fivespot:1", **spec}})


def repo(**spec: Any) -> Repo:
    return Repo(platform=platform(**spec), consumers=(), builtin_providers=(),
                custom_providers=(), tenants=(), fixtures=())


def messages(target: Repo, rule: str) -> list[str]:
    return [f"{d.field}: {d.message}" for d in cel_preflight.check(target, [crd_with_rule(rule)])]


def test_the_default_range_is_every_supported_version() -> None:
    assert repo().platform.spec.kubernetes_versions() == kubeversions.SUPPORTED
    assert repo().platform.spec.min_kubernetes_version == kubeversions.OLDEST.minor


def test_a_rule_over_budget_on_older_servers_only_is_refused_naming_them() -> None:
    rule, total = messages(repo(), NAME_RULE)
    assert rule.startswith(f".x-kubernetes-validations[0]: CEL rule {NAME_RULE!r}: Kubernetes "
                           "1.34, 1.35 and 1.36 would refuse it (1.37 accepts it): estimated rule "
                           "cost exceeds budget by factor of 81.8x"), rule
    assert total.startswith("spec.versions: CRD gates.example.com: Kubernetes 1.34, 1.35 and 1.36 "
                            "would refuse it (1.37 accepts it): x-kubernetes-validations estimated "
                            "rule cost total"), total


def test_the_same_rule_compiles_when_only_the_version_that_accepts_it_is_targeted() -> None:
    assert messages(repo(minKubernetesVersion="1.37"), NAME_RULE) == []
    rule, _ = messages(repo(maxKubernetesVersion="1.35"), NAME_RULE)
    assert "factor of 81.8x" in rule and "would refuse" not in rule  # every target refuses


def test_a_cel_library_one_targeted_version_lacks_is_refused_naming_it_and_the_fix() -> None:
    [message] = messages(repo(), LISTS_RULE)
    assert "calls distinct() of the CEL lists extension" in message
    assert "Kubernetes 1.34 would refuse it (raise minKubernetesVersion to 1.35" in message
    assert messages(repo(minKubernetesVersion="1.35"), LISTS_RULE) == []


@pytest.mark.parametrize("spec, error", [
    ({"maxKubernetesVersion": "1.38"}, "maxKubernetesVersion 1.38 is newer than fivespot supports "
                                       "(1.34 to 1.37)"),
    ({"maxKubernetesVersion": "1.33"}, "maxKubernetesVersion 1.33 is older than fivespot supports"),
    ({"minKubernetesVersion": "1.36", "maxKubernetesVersion": "1.35"},
     "maxKubernetesVersion 1.35 is older than minKubernetesVersion 1.36"),
    ({"minKubernetesVersion": "1.38"}, "minKubernetesVersion 1.38 is newer than fivespot supports"),
])
def test_a_range_outside_what_is_supported_is_an_error_naming_the_range(
        spec: dict[str, str], error: str) -> None:
    with pytest.raises(ValueError, match=re.escape(error)):
        platform(**spec)


def test_an_older_minimum_is_targeted_as_the_oldest_supported_with_a_warning() -> None:
    old = repo(minKubernetesVersion="1.30")
    assert old.platform.spec.kubernetes_versions()[0] is kubeversions.OLDEST
    [warning] = untested_kubernetes(old)
    assert warning.field == "spec.minKubernetesVersion"
    assert "1.30 is older than the Kubernetes versions fivespot supports (1.34 to 1.37)" in \
        warning.message
    assert untested_kubernetes(repo()) == []


def test_an_over_budget_rule_in_a_config_repo_is_a_file_line_error_for_the_refusing_versions(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config"
    config.mkdir()
    for name in ("platform.yaml", "consumers.yaml"):
        source = EXAMPLE / name
        if source.exists():
            (config / name).write_text(source.read_text())
    (config / "providers.yaml").write_text(CUSTOM_PROVIDER)
    assert fivespot(["compile", str(config), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "providers.yaml:" in err and "budget" in err and "(1.37 accepts it)" in err, err
    platform_text = (config / "platform.yaml").read_text().replace(
        'minKubernetesVersion: "1.34"', 'minKubernetesVersion: "1.37"')
    (config / "platform.yaml").write_text(platform_text)
    assert fivespot(["compile", str(config), "--out", str(tmp_path / "out")]) == 0, \
        capsys.readouterr().err


CUSTOM_PROVIDER = """\
apiVersion: config.5spot.finos.org/v1alpha1
kind: ScheduleProvider
metadata: {name: gates}
spec:
  custom:
    - kind: GateSchedule
      specSchema:
        type: object
        properties:
          owner:
            type: object
            x-kubernetes-embedded-resource: true
            properties:
              spec:
                type: object
                properties:
                  prefixes: {type: array, maxItems: 100, items: {type: string, maxLength: 64}}
            x-kubernetes-validations:
              - rule: "self.spec.prefixes.exists(p, self.metadata.name.contains(p))"
"""


def test_check_decides_as_the_newest_targeted_version_or_the_one_asked_for(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert fivespot(["compile", str(EXAMPLE), "--out", str(out)]) in (0, 1)
    capsys.readouterr()
    scap = out / "crds" / "scheduledcapacities.5spot.finos.org.yaml"
    assert f"{kubeversions.TARGETS_ANNOTATION}: 1.34-1.37" in scap.read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: 5spot.finos.org/v1alpha1\nkind: ScheduledCapacity\n"
                   "metadata:\n  name: pool\n  namespace: agents\n  labels:\n"
                   f"    {'k' * 64}: v\n")
    outputs = {}
    for version in ("1.34", "1.37", None):
        flags = ["--kubernetes-version", version] if version else []
        assert fivespot(["check", "--no-cache", "--policies", str(out), str(bad), *flags]) == 1
        outputs[version] = capsys.readouterr().out
    assert "name part must be no more than 63 characters" in outputs["1.34"]
    assert "name part must be no more than 63 bytes" in outputs["1.37"]
    assert outputs[None] == outputs["1.37"]


def test_an_unsupported_check_version_is_exit_2_naming_the_range(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_code:
        fivespot(["check", "--policies", "x", "y.yaml", "--kubernetes-version", "1.33"])
    assert exit_code.value.code == 2
    assert "Kubernetes 1.33 is not supported: fivespot supports 1.34 to 1.37" in \
        capsys.readouterr().err
