"""`fivespot dev` refuses bad input before it starts anything: a config repo that does not compile
is reported like `fivespot compile` reports it, a state folder holding someone else's files is
left alone, and the compiled Deployments become local processes with their own arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo
from fivespot.compiler.scaffold import init
from fivespot.deploy.manifests import load
from fivespot.deploy.installer import InstallError
from fivespot.devcluster import kubectl
from fivespot.devcluster.dev import CapacityWatch, DevSession, components, local_args, tenant_namespaces
from fivespot.cli.main import main


@pytest.fixture
def config(tmp_path: Path) -> Path:
    folder = tmp_path / "config"
    init(folder)
    return folder


def test_dev_on_a_config_that_does_not_compile_names_the_file_line_and_field(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tenants = config / "tenants.yaml"
    tenants.write_text(tenants.read_text().replace("maxActiveValue: 10", "maxActiveValue: ten"))
    state = tmp_path / "state"
    assert main(["dev", str(config), "--state-dir", str(state)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("tenants.yaml:11:3: spec.maxActiveValue: Input should be a valid integer")
    assert error.endswith(f"1 error in {config}; nothing was started\n")
    assert not (state / "cluster").exists()


def test_dev_leaves_a_state_folder_with_files_of_someone_else_untouched(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "state" / "out" / "mine.txt"
    mine.parent.mkdir(parents=True)
    mine.write_text("keep me")
    assert main(["dev", str(config), "--state-dir", str(tmp_path / "state")]) == 2
    assert "fivespot dev: --state-dir: " in capsys.readouterr().err
    assert mine.read_text() == "keep me" and sorted(mine.parent.iterdir()) == [mine]


def test_dev_with_a_crd_file_that_does_not_exist_says_so_before_it_starts_anything(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    missing = tmp_path / "queue-crd.yaml"
    assert main(["dev", str(config), "--state-dir", str(state), "--crd", str(missing)]) == 2
    assert capsys.readouterr().err == f"fivespot dev: --crd {missing}: no such file; nothing was started\n"
    assert not state.exists()


def test_a_crd_the_api_server_refuses_is_bad_input_with_the_servers_words_not_a_fivespot_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusal = ('Error from server (BadRequest): error when creating "queue-crd.yaml": '
               'CustomResourceDefinition in version "v1" cannot be handled as a '
               'CustomResourceDefinition: strict decoding error: unknown field "spec.versions[0]"')

    def refuse(kubeconfig: Path, path: Path) -> str:
        raise kubectl.KubectlFailed(["apply", "-f", str(path)], refusal)

    monkeypatch.setattr(kubectl, "apply", refuse)
    session = DevSession(tmp_path / "config", tmp_path / "state", crds=[Path("queue-crd.yaml")],
                         report=lambda line: None)
    session.kubeconfig = tmp_path / "kubeconfig"
    with pytest.raises(InstallError) as raised:
        session._apply_crds()
    assert str(raised.value) == f"--crd queue-crd.yaml: {refusal}"


def test_dev_prints_every_phase_the_watch_delivers_once_however_short(tmp_path: Path) -> None:
    printed: list[str] = []
    watch = CapacityWatch(api=None, report=printed.append)

    def scap(phase: str | None, written: int | None, generation: int = 1) -> dict[str, object]:
        status = {} if phase is None else {"phase": phase, "writtenValue": written}
        return {"metadata": {"namespace": "team-a", "name": "nightly", "generation": generation},
                "spec": {"targetRef": {"apiVersion": "jobs.example.com/v1", "kind": "Queue",
                                       "name": "nightly"},
                         "capacity": {"path": "spec.workers", "activeValue": 8}},
                "status": status}

    for event in (scap(None, None), scap("Inactive", 0), scap("Inactive", 0, generation=2),
                  scap("Active", 8), scap("HandingBack", 0), scap("Inactive", 0)):
        watch.see(event)
    assert printed == [
        "scheduledcapacity team-a/nightly: Pending",
        "scheduledcapacity team-a/nightly: Inactive, spec.workers=0 written to Queue nightly",
        "scheduledcapacity team-a/nightly: Active, spec.workers=8 written to Queue nightly",
        "scheduledcapacity team-a/nightly: HandingBack, spec.workers=0 written to Queue nightly",
        "scheduledcapacity team-a/nightly: Inactive, spec.workers=0 written to Queue nightly",
    ]


def test_every_compiled_deployment_becomes_a_local_process_with_its_own_arguments(
    config: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    write_tree(compile_repo(config).files, out)
    manifests = load(out)
    found = {c.name: c for c in components(manifests)}
    assert set(found) == {m.name for m in manifests if m.kind == "Deployment"}
    webhook = found["fivespot-webhook"]
    assert webhook.serves_admission and not found["fivespot-capacity-controller"].serves_admission
    args = local_args(webhook, tmp_path / "bundle.json", tmp_path / "kubeconfig", webhook_port=9443,
                      tls=(tmp_path / "tls.crt", tmp_path / "tls.key"), metrics_port=9090)
    assert args[:2] == ["webhook", "serve"]
    assert args[args.index("--bundle") + 1] == str(tmp_path / "bundle.json")
    assert args[args.index("--port") + 1] == "9443" and "--cert-dir" not in args
    assert args[-4:] == ["--kubeconfig", str(tmp_path / "kubeconfig"), "--metrics-port", "9090"]
    assert tenant_namespaces(manifests, "5spot-system") == ["team-a"]


def test_dev_runs_the_webhook_without_client_authentication_the_local_api_server_cannot_offer(
    config: Path, tmp_path: Path
) -> None:
    platform = config / "platform.yaml"
    platform.write_text(platform.read_text().replace("  webhook:\n", "  webhook:\n"
                        "    clientAuthentication:\n"
                        "      caConfigMap: {name: apiserver-client-ca}\n"
                        "      allowedNames: [kube-apiserver-webhook-client]\n", 1))
    out = tmp_path / "out"
    write_tree(compile_repo(config).files, out)
    webhook = {c.name: c for c in components(load(out))}["fivespot-webhook"]
    assert "--client-ca-path" in webhook.args and "--client-subject-names" in webhook.args
    args = local_args(webhook, tmp_path / "bundle.json", tmp_path / "kubeconfig", webhook_port=9443,
                      tls=(tmp_path / "tls.crt", tmp_path / "tls.key"), metrics_port=9090)
    assert not {"--client-ca-path", "--client-subject-names", "/var/run/fivespot/client-ca/ca.crt",
                "kube-apiserver-webhook-client"} & set(args)
