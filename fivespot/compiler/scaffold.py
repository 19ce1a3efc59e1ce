"""`fivespot init DIR`: a commented config repo that compiles, passes its fixtures and installs.

One consumer (an `apps/v1` Deployment's `spec.replicas`, a kind every cluster serves, so the
scaffold runs anywhere without a CRD of its own), the two built-in providers a first schedule
needs, one tenant, and fixtures that show the rules both ways. Every file starts with the
yaml-language-server `$schema` line pointing at `schemas/`, which `fivespot schema` writes, so an
editor completes and checks each field. The suite compiles, tests and installs exactly these
files, so what a new user starts from is known to work.

`init` writes only into an absent or empty folder: it never replaces anything a user has.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from fivespot.commandline import docs

SCHEMA_LINE: Final = "# yaml-language-server: $schema=schemas/fivespot-config.schema.json\n"

PLATFORM: Final = """\
# The platform: where fivespot runs and how admission is enforced. One Platform per repo.
apiVersion: config.5spot.finos.org/v1alpha1
kind: Platform
metadata:
  name: platform
spec:
  namespace: 5spot-system          # fivespot's own namespace (Pod Security: restricted)
  # image: registry.example.com/platform/fivespot:0.1.0   # default: the image `make image` builds
  controllerReplicas: 2            # replicas of each controller; one Lease-elected leader per partition
  partitions:
    - name: default                # takes every namespace no other partition lists
  webhook:
    failurePolicy: Fail            # roll out with Ignore first on a busy cluster, then Fail
    timeoutSeconds: 5
    hostGovernance: Deny           # or Warn
    certificate:
      mode: self-managed           # or cert-manager, with issuerRef: {kind: Issuer, name: ...}
    # networkPolicy:               # who may call the webhook: your API server's addresses
    #   allowedSources: [{ipBlock: {cidr: 172.18.0.0/16}}]   # kind's network; EKS, GKE, OpenShift: """ + docs.WHO_MAY_CALL_THE_WEBHOOK + """
  enforcement: vap                 # ValidatingAdmissionPolicies (Kubernetes >= 1.30); or webhook, or both
  minKubernetesVersion: "1.34"     # oldest API server the output must install on (1.34 to 1.37)
  # maxKubernetesVersion: "1.37"   # newest (default: the newest supported); check decides as it
  # gitops:                        # emit an Argo CD Application and/or Flux Kustomizations
  #   argocd: {repoURL: https://git.example.com/platform/config.git, path: clusters/prod/fivespot}
"""

CONSUMERS: Final = """\
# A CapacityConsumer is a kind a ScheduledCapacity may gate, and exactly which fields of it.
# This one lets tenants scale a Deployment's replicas by a schedule (0 outside it).
apiVersion: config.5spot.finos.org/v1alpha1
kind: CapacityConsumer
metadata:
  name: deployments
spec:
  group: apps
  version: v1
  kind: Deployment
  resource: deployments
  capacityPaths: [spec.replicas]   # the only field the capacity controller may write
  drainedPath: status.readyReplicas  # the drain counter a ScheduledCapacity's spec.handback may wait on (0: handed back)
  maxActiveValue: 20               # no tenant may ask for more than this
"""

PROVIDERS: Final = """\
# The schedule providers to install. Each is its own controller and CRD in
# spotschedules.5spot.finos.org; a ScheduledCapacity follows one provider object's status.active.
apiVersion: config.5spot.finos.org/v1alpha1
kind: ScheduleProvider
metadata:
  name: builtin
spec:
  builtin:
    - ManualSchedule               # on/off by hand: kubectl patch ms NAME --type merge -p '{"spec":{"enabled":true}}'
    - TimeBasedSpotSchedule        # days and hours in a time zone
  # calendars:                     # exchange trading calendars, with CapitalMarketsSchedule in builtin
  #   - {name: nyse, namespaces: [team-a], exchange: XNYS, years: {first: 2026, last: 2027}}
"""

TENANTS: Final = """\
# A TenantPolicy says which namespaces may create ScheduledCapacities, for which consumers, up to
# which value. A namespace without one cannot use ScheduledCapacity at all.
apiVersion: config.5spot.finos.org/v1alpha1
kind: TenantPolicy
metadata:
  name: team-a
spec:
  namespaces: [team-a]
  consumers: [deployments]
  maxActiveValue: 10
  validationActions: [Deny]
"""

FIXTURES_HEADER: Final = """\
# Fixtures: objects with the verdict the API server must give them. `fivespot test .` checks
# every one offline; CI runs it on every push.
"""


def _fixture(name: str, expect: str, *, value: int = 3, namespace: str = "team-a",
             path: str = "spec.replicas") -> str:
    """One Fixture document: the scaffold's ScheduledCapacity `web`, varied where the rule bites."""
    return f"""\
apiVersion: config.5spot.finos.org/v1alpha1
kind: Fixture
metadata: {{name: {name}}}
spec:
  object:
    apiVersion: 5spot.finos.org/v1alpha1
    kind: ScheduledCapacity
    metadata: {{name: web, namespace: {namespace}}}
    spec:
      schedule: {{apiVersion: spotschedules.5spot.finos.org/v1alpha1, kind: ManualSchedule, name: web}}
      targetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}
      capacity: {{path: {path}, activeValue: {value}}}
  expect:{expect}
"""


FIXTURES: Final = FIXTURES_HEADER + "---\n".join((
    _fixture("team-a-scales-its-deployment-allowed", " {allowed: true}"),
    _fixture("over-the-tenant-limit-denied", """
    allowed: false
    violations:
    - {policy: fivespot-tenant-limits, field: spec.capacity.activeValue}""", value=11),
    _fixture("namespace-without-tenant-policy-denied", """
    allowed: false
    violations:
    - {policy: fivespot-scap-tenancy, field: metadata.namespace, message: namespace team-b has no TenantPolicy}""",
             namespace="team-b"),
    _fixture("a-field-the-consumer-does-not-allow-denied", " {allowed: false}",
             path="spec.template.spec.priority"),
))

README: Final = """\
# fivespot config repo

Made by `fivespot init`. Each `*.yaml` here is a fivespot config document; the folder is the
input of every command:

```sh
fivespot test .                        # the fixtures' verdicts, offline (CI runs this)
fivespot compile . --out ../out        # the cluster artifacts (commit them; CI: --check)
fivespot install ../out                # apply them to the cluster of your kubeconfig, in order
fivespot dev .                         # or: everything on a local control plane, to try it
```

`schemas/` holds the JSON Schemas of the config kinds (`fivespot schema --out schemas` renews
them); editors with the YAML language server read the `$schema` line on top of each file.
"""

FILES: Final = {
    "platform.yaml": SCHEMA_LINE + PLATFORM,
    "consumers.yaml": SCHEMA_LINE + CONSUMERS,
    "providers.yaml": SCHEMA_LINE + PROVIDERS,
    "tenants.yaml": SCHEMA_LINE + TENANTS,
    "fixtures/fixtures.yaml": "# yaml-language-server: $schema=../schemas/fivespot-config.schema.json\n"
                              + FIXTURES,
    "README.md": README,
}


class ScaffoldError(Exception):
    """The folder cannot take a new config repo; the message says why."""


def scaffold_files() -> dict[str, str]:
    """Every file `init` writes (relative path -> text), the JSON Schemas included."""
    from fivespot.compiler.schemas import schema_files

    return {**FILES, **{f"schemas/{name}": text for name, text in schema_files().items()}}


def init(directory: Path) -> list[str]:
    """Write the scaffold into `directory` (absent or empty); the paths written."""
    return write_new(directory, scaffold_files(), "fivespot init")


def write_new(directory: Path, files: dict[str, str], command: str) -> list[str]:
    """Write `files` (relative path -> text) into `directory`, which must be absent or empty
    (ScaffoldError if not): a command that writes a user's starting point never replaces
    anything of theirs. The paths written."""
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        what = "a file" if not directory.is_dir() else "a folder that is not empty"
        raise ScaffoldError(f"{directory} is {what}; {command} writes only into a new or "
                            "empty folder, so nothing of yours is replaced")
    directory.mkdir(parents=True, exist_ok=True)
    for relative, text in sorted(files.items()):
        target = directory / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "x", encoding="utf-8") as stream:  # never over a file that appeared since
            stream.write(text)
    return sorted(files)
