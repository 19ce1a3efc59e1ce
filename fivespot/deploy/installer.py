"""The shell of `fivespot install` / `uninstall`: apply, wait and delete through the API server.

Every object is sent with server-side apply (`fivespot` field manager, `force` so a hand edit of
a compiled field is put back, as a GitOps sync would), so a second run changes nothing and the
fields another manager owns (the webhook's injected caBundle) are left alone. An object marked
create-only (`fivespot.api.identities.CREATE_ONLY`, the webhook's TLS Secret, compiled empty for the
webhook to fill) is created when it is missing and otherwise left as it is, as Flux does. `--dry-run` sends
the same requests with `dryRun=All`: the API server validates and defaults each object as it
would, and nothing is stored. Each wave must be healthy (`health.judge`) before the next is sent;
an object that is refused or does not become healthy in time stops the install, named.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from fivespot.api.identities import CREATE_ONLY, MACHINE_CONTROLLER
from fivespot.commandline import docs
from fivespot.api.kinds import machine_lifecycle as lifecycle
from fivespot.runtime import kube
from fivespot.deploy.health import Health, judge
from fivespot.deploy.manifests import Manifest, Wave, waves

FIELD_MANAGER: Final = "fivespot"
APPLY_PATCH: Final = "application/apply-patch+yaml"
POLL_S: Final = 0.5
PROGRESS_EVERY_S: Final = 5.0
WEBHOOK_KINDS: Final = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


class InstallError(Exception):
    """The cluster refused an object, or an object did not become healthy in time."""


Report = Callable[[str], None]


@dataclass
class Summary:
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, action: str) -> None:
        self.counts[action] = self.counts.get(action, 0) + 1

    def render(self) -> str:
        return ", ".join(f"{n} {action}" for action, n in sorted(self.counts.items())) or "nothing"


_VOLATILE: Final = ("managedFields", "resourceVersion", "generation")


def _comparable(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without what changes without anyone applying anything."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _VOLATILE}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}


class Cluster:
    """Paths of objects on one API server, from discovery (cached per group/version)."""

    def __init__(self, api: kube.ApiClient) -> None:
        self.api = api
        self._resources: dict[str, dict[str, tuple[str, bool]]] = {}

    def resource(self, manifest: Manifest, *, refresh: bool = False) -> tuple[str, bool] | None:
        """(plural, namespaced) of the manifest's kind in its version, or None if not served."""
        version = manifest.api_version
        if refresh or version not in self._resources:
            base = f"/apis/{version}" if "/" in version else f"/api/{version}"
            try:
                listed = kube.request(self.api, "GET", base).get("resources") or []
            except kube.ApiError as error:
                if error.not_found:
                    self._resources.pop(version, None)
                    return None
                raise
            self._resources[version] = {str(r["kind"]): (str(r["name"]), bool(r.get("namespaced")))
                                        for r in listed if "/" not in str(r.get("name", ""))}
        return self._resources[version].get(manifest.kind)

    def path(self, manifest: Manifest, plural: str, namespaced: bool) -> str:
        group, _, version = manifest.api_version.rpartition("/")
        namespace = manifest.namespace if namespaced else None
        return kube.resource_path(group, version, plural, namespace, manifest.name)

    def get(self, path: str) -> dict[str, Any] | None:
        try:
            return kube.request(self.api, "GET", path)
        except kube.ApiError as error:
            if error.not_found:
                return None
            raise


class Installer:
    """Install or uninstall one compiled output on one cluster, reporting as it goes."""

    def __init__(self, api: kube.ApiClient, *, dry_run: bool = False,
                 timeout_s: float = 300.0, report: Report = print,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.cluster = Cluster(api)
        self.dry_run, self.timeout_s, self.report = dry_run, timeout_s, report
        self.clock, self.sleep = clock, sleep

    # --- install -------------------------------------------------------------------------------

    def install(self, manifests: list[Manifest]) -> Summary:
        summary = Summary()
        crds = {(_crd_group_kind(m)): m.wave for m in manifests if m.kind == "CustomResourceDefinition"}
        namespaces = {m.name for m in manifests if m.kind == "Namespace"}
        for step in install_steps(manifests):
            count = len(step.manifests)
            self.report(f"{step.title}: {count} object{'' if count == 1 else 's'}")
            for manifest in step.manifests:
                action, note = self._apply(manifest, crds, namespaces)
                summary.add(action)
                self.report(f"  {manifest.describe()} {action}" + (f" ({note})" if note else ""))
            if not self.dry_run:
                self._wait_healthy(step)
        return summary

    def _served(self, manifest: Manifest, crds: dict[tuple[str, str], int]) -> tuple[str, bool] | None:
        """The manifest's resource, waiting (bounded) for a CRD applied in an earlier wave."""
        found = self.cluster.resource(manifest)
        deadline = self.clock() + self.timeout_s
        while found is None and not self.dry_run and (manifest.group, manifest.kind) in crds \
                and self.clock() < deadline:
            self.sleep(POLL_S)
            found = self.cluster.resource(manifest, refresh=True)
        return found

    def _apply(self, manifest: Manifest, crds: dict[tuple[str, str], int],
               namespaces: set[str]) -> tuple[str, str]:
        """What applying did (or, in a dry run, would do), and a note when it is not certain."""
        resource = self._served(manifest, crds)
        if resource is None:
            if self.dry_run and (manifest.group, manifest.kind) in crds:
                return "would be created", "its CRD is applied first; not validated"
            raise InstallError(f"{manifest.source}: {manifest.describe()}: the cluster does not "
                               f"serve {manifest.kind} in {manifest.api_version}; install the CRD "
                               "that defines it first")
        path = self.cluster.path(manifest, *resource)
        before = self.cluster.get(path)
        if before is not None and _create_only(manifest):
            return "unchanged", ""  # created once: what it holds is filled in on the cluster
        query: dict[str, Any] = {"fieldManager": FIELD_MANAGER, "force": "true"}
        if self.dry_run:
            query["dryRun"] = "All"
        try:
            after = kube.request(self.cluster.api, "PATCH", path, query=query,
                                 body=json.dumps(manifest.obj), content_type=APPLY_PATCH)
        except kube.ApiError as error:
            if self.dry_run and error.not_found and manifest.namespace in namespaces:
                return "would be created", f"namespace {manifest.namespace} is created first; not validated"
            raise InstallError(f"{manifest.source}: {manifest.describe()}: the API server "
                               f"refused it: {error.message}") from None
        return _action(before, after, self.dry_run), ""

    def _wait_healthy(self, step: Step) -> None:
        deadline = self.clock() + self.timeout_s
        next_report = self.clock() + PROGRESS_EVERY_S
        pending = list(step.manifests)
        while pending:
            verdicts = [(m, self._health(m)) for m in pending]
            pending = [m for m, health in verdicts if not health.ready]
            if not pending:
                break
            now = self.clock()
            waiting = [(m, h) for m, h in verdicts if not h.ready]
            if now >= deadline:
                manifest, health = waiting[0]
                raise InstallError(
                    f"{manifest.source}: {manifest.describe()} is not ready after "
                    f"{self.timeout_s:.0f}s: {health.detail}" + _hint(manifest))
            if now >= next_report:
                for manifest, health in waiting:
                    self.report(f"  waiting for {manifest.describe()}: {health.detail}")
                next_report = now + PROGRESS_EVERY_S
            self.sleep(POLL_S)
        if any(_needs_wait(m) for m in step.manifests):
            self.report(f"  {step.name} ready")

    def _health(self, manifest: Manifest) -> Health:
        if not _needs_wait(manifest):
            return Health(True, "")
        resource = self.cluster.resource(manifest)
        live = self.cluster.get(self.cluster.path(manifest, *resource)) if resource else None
        return judge(live) if live is not None else Health(False, "not found")

    # --- uninstall -----------------------------------------------------------------------------

    def uninstall(self, manifests: list[Manifest], *, delete_crds: bool) -> Summary:
        summary = Summary()
        crd_kinds = {_crd_group_kind(m) for m in manifests if m.kind == "CustomResourceDefinition"}
        if _reconciles_machines(manifests):
            self._retire_machines(delete_crds)
        for manifest in uninstall_order(manifests):
            custom = (manifest.group, manifest.kind) in crd_kinds
            if manifest.kind == "Namespace" or (
                    not delete_crds and (manifest.kind == "CustomResourceDefinition" or custom)):
                summary.add("kept")  # a namespace takes everything in it: a tenant's workloads
                continue
            action = self._delete(manifest)
            summary.add(action)
            self.report(f"  {manifest.describe()} {action}")
        namespaces = sorted(m.name for m in manifests if m.kind == "Namespace")
        if namespaces:
            self.report(f"kept the namespaces {', '.join(namespaces)} (deleting a namespace "
                        "deletes everything in it; Argo CD and Flux leave them too)")
        if not delete_crds and crd_kinds:
            self.report(f"kept {len(crd_kinds)} CRDs and every object of their kinds "
                        "(--delete-crds deletes them, and with them every such object in the cluster)")
        return summary

    def _retire_machines(self, delete_crds: bool) -> None:
        """Deleting the CRD deletes every ScheduledMachine, and each waits on the machine
        controller's finalizer (its machine leaves the cluster drained first): so with
        --delete-crds they are deleted while the controller still runs, and waited for; without
        it they stay, and a later delete of one waits for a machine controller to come back."""
        path = kube.resource_path(lifecycle.GROUP, lifecycle.VERSION, lifecycle.PLURAL)
        try:
            names = self._machine_names(path)
        except kube.ApiError as error:
            if error.not_found:
                return  # the CRD is not served: nothing of its kind is left
            raise
        if not names:
            return
        if not delete_crds:
            self.report(f"kept {len(names)} ScheduledMachines: with the machine controller "
                        "uninstalled, deleting one waits until it is installed again (or its "
                        f"finalizer {lifecycle.FINALIZER} is removed by hand: "
                        f"{docs.DELETING_A_SCHEDULED_MACHINE})")
            return
        if self.dry_run:
            self.report(f"  would delete {len(names)} ScheduledMachines first, each draining "
                        "its machine out of the cluster")
            return
        self.report(f"deleting {len(names)} ScheduledMachines first, while the machine "
                    "controller runs: each drains its machine out of the cluster, then goes")
        for name in names:
            namespace, _, short = name.partition("/")
            try:
                kube.request(self.cluster.api, "DELETE", kube.resource_path(
                    lifecycle.GROUP, lifecycle.VERSION, lifecycle.PLURAL, namespace, short),
                    query={"propagationPolicy": "Background"})
            except kube.ApiError as error:
                if not error.not_found:
                    raise
        deadline = self.clock() + self.timeout_s
        while (left := self._machine_names(path)) and self.clock() < deadline:
            self.sleep(1.0)
        if left:
            shown = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
            raise InstallError(
                f"{len(left)} ScheduledMachines are still leaving after {self.timeout_s:.0f}s "
                f"({shown}): their machines are draining (see `kubectl describe sm`), or the "
                "machine controller is not running. Nothing else was deleted; run uninstall "
                "again once `kubectl get sm -A` lists nothing, or see "
                f"{docs.DELETING_A_SCHEDULED_MACHINE} for the way out")

    def _machine_names(self, path: str) -> list[str]:
        listed = kube.request(self.cluster.api, "GET", path)
        return sorted(f"{item['metadata']['namespace']}/{item['metadata']['name']}"
                      for item in listed.get("items") or [])

    def _delete(self, manifest: Manifest) -> str:
        resource = self.cluster.resource(manifest)
        if resource is None:
            return "absent"
        path = self.cluster.path(manifest, *resource)
        query: dict[str, Any] = {"propagationPolicy": "Background"}
        if self.dry_run:
            query["dryRun"] = "All"
        try:
            kube.request(self.cluster.api, "DELETE", path, query=query)
        except kube.ApiError as error:
            if error.not_found:
                return "absent"
            raise InstallError(f"{manifest.describe()}: the API server refused the deletion: "
                               f"{error.message}") from None
        return "would be deleted" if self.dry_run else "deleted"


@dataclass(frozen=True)
class Step:
    """What `install` applies together, then waits for."""

    name: str
    """`wave 3`, `wave 3 webhook configurations`: for the progress lines."""
    manifests: tuple[Manifest, ...]
    why: str = ""

    @property
    def title(self) -> str:
        return f"{self.name} ({self.why})" if self.why else self.name


def install_steps(manifests: list[Manifest]) -> list[Step]:
    """The waves in order, except webhook configurations: they come right after the last wave
    with a Deployment (or their own wave, if later), once that wave is healthy. Applied earlier,
    a configuration with `failurePolicy: Fail` would refuse every guarded write while no webhook
    answers yet; applied then, the webhook injects its caBundle within a second, and the step
    waits for that."""
    hooks = tuple(m for m in manifests if m.kind in WEBHOOK_KINDS)
    after = max([m.wave for m in manifests if m.kind == "Deployment" or m.kind in WEBHOOK_KINDS],
                default=0)
    steps = []
    for wave in waves(manifests):
        rest = tuple(m for m in wave.manifests if m.kind not in WEBHOOK_KINDS)
        if rest:
            steps.append(Step(f"wave {wave.number}", rest,
                              ", ".join(Wave(wave.number, rest).layers())))
        if hooks and wave.number == after:
            steps.append(Step(f"wave {wave.number} webhook configurations", hooks,
                              "now that the webhook is Available"))
    return steps


def uninstall_order(manifests: list[Manifest]) -> list[Manifest]:
    """Webhook configurations first (so no write is refused by a webhook that is going away),
    then the waves in reverse, each in reverse apply order."""
    ordered = [m for wave in reversed(waves(manifests)) for m in reversed(wave.manifests)]
    return ([m for m in ordered if m.kind in WEBHOOK_KINDS]
            + [m for m in ordered if m.kind not in WEBHOOK_KINDS])


def _reconciles_machines(manifests: list[Manifest]) -> bool:
    """Whether this output runs fivespot's machine controller (whose finalizer ScheduledMachines
    carry)."""
    return any(m.kind == "Deployment" and m.name == MACHINE_CONTROLLER for m in manifests)


def _crd_group_kind(manifest: Manifest) -> tuple[str, str]:
    spec = manifest.obj.get("spec") or {}
    return str(spec.get("group", "")), str((spec.get("names") or {}).get("kind", ""))


def _create_only(manifest: Manifest) -> bool:
    key, value = CREATE_ONLY
    return bool((manifest.obj["metadata"].get("annotations") or {}).get(key) == value)


def _needs_wait(manifest: Manifest) -> bool:
    return manifest.kind in ("CustomResourceDefinition", "Deployment", "Namespace", *WEBHOOK_KINDS)


def _action(before: dict[str, Any] | None, after: dict[str, Any], dry_run: bool) -> str:
    """created / configured / unchanged, from the object before and after the apply. Status
    is not compared: a controller may move it between two runs without anything applied."""
    if before is None:
        return "would be created" if dry_run else "created"
    if _comparable(before) == _comparable(after):
        return "unchanged"
    return "would be configured" if dry_run else "configured"


def _hint(manifest: Manifest) -> str:
    if manifest.kind in WEBHOOK_KINDS:
        return (" (self-managed certificates: the webhook's log says why it could not inject it; "
                "cert-manager: `kubectl describe certificate` in the install namespace)")
    if manifest.kind == "Deployment":
        return (f" (see `kubectl -n {manifest.namespace} describe deployment {manifest.name}` and "
                f"its pods' events: is the image pullable by the nodes?)")
    return ""
