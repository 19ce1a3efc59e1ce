"""Every compiled Deployment runs a command the `fivespot` CLI actually has."""

from __future__ import annotations

from pathlib import Path

from fivespot.cli.main import build_parser
from fivespot.compiler.pipeline import compile_repo

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent-sandbox" / "config"


def test_every_compiled_deployment_runs_a_command_the_cli_parses() -> None:
    deployments = [a.obj for a in compile_repo(EXAMPLE).artifacts if a.kind == "Deployment"]
    assert len(deployments) >= 4
    for deployment in deployments:
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        args = container["args"]
        parsed = build_parser(args).parse_args(args)
        assert callable(parsed.handler), args


def test_compile_does_not_load_the_kubernetes_client() -> None:
    import subprocess
    import sys

    code = "import sys; from fivespot.cli.main import build_parser; build_parser(['compile']); " \
           "print('kubernetes' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_compiled_controllers_resync_hourly_and_providers_every_ten_minutes() -> None:
    """The backstop resync (decision 0040): an hour for the controllers, whose resync re-drives
    a thousand objects; 600 s for a provider, whose few schedules are cheap to look at again."""
    deployments = [a.obj for a in compile_repo(EXAMPLE).artifacts if a.kind == "Deployment"]
    periods: dict[str, float] = {}
    for deployment in deployments:
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        parsed = build_parser(args).parse_args(args)
        if hasattr(parsed, "resync"):
            periods[deployment["metadata"]["name"]] = parsed.resync
    assert periods["fivespot-capacity-controller"] == 3600.0
    assert periods["fivespot-audit-controller"] == 3600.0
    providers = {n: p for n, p in periods.items() if n.startswith("fivespot-provider-")}
    assert providers and set(providers.values()) == {600.0}
