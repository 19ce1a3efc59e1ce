"""The GitOps layout: a kustomize tree, Argo CD sync waves, Application, AppProject and health Lua,
Flux source, entry Kustomization and one Kustomization per layer.

Order matters on a live cluster: CRDs before anything that uses them, namespaces and RBAC before
workloads, admission before the workloads it guards, the webhook configuration only once the
webhook Deployment is healthy (a configuration with failurePolicy Fail and no server behind it
refuses every write it guards), schedules last. `base.LAYERS` is that order; Argo CD gets it from
the sync-wave annotation on every object (`waves/` lists every layer for it), Flux from one
Kustomization per layer chained with dependsOn and `wait`, since a Flux dry run fails when a CRD
arrives in the same Kustomization as its objects.

Nothing a tenant has is at the mercy of a prune: CRDs (deleting one deletes every object of its
kind) and namespaces carry the Argo CD `Prune=false,Delete=false` sync options and the Flux
`prune: disabled` annotation, so neither dropping a kind from the config, nor deleting the
Application or a Kustomization, deletes them (`compile` warns when a CRD leaves the output). The
controllers' RoleBindings in tenant namespaces are not pruned either (`Prune=false`, `prune:
disabled`; deleted with the Application): a namespace's objects are handed back to 0 and reported
with them after the namespace leaves every TenantPolicy (`compile` warns, and says when to delete
them).

With Flux configured, the root `kustomization.yaml` lists only `flux/` (the source and the entry
Kustomization): a parent Kustomization that recurses into the output applies the dependsOn chain,
never every layer at once.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import PurePosixPath
from typing import Any, Final

from fivespot.api.identities import CAPACITY_CONTROLLER, WEBHOOK_CONFIGURATION, WEBHOOK_TLS_SECRET
from fivespot.compiler.emit import health
from fivespot.compiler.emit.base import LAYERS, RBAC, SCHEDULES, SYNC_WAVES, WEBHOOK_CONFIG, Artifact, metadata
from fivespot.compiler.repo import Repo

SYNC_WAVE: Final = "argocd.argoproj.io/sync-wave"
SYNC_OPTIONS: Final = "argocd.argoproj.io/sync-options"
COMPARE_OPTIONS: Final = "argocd.argoproj.io/compare-options"
FLUX_PRUNE: Final = "kustomize.toolkit.fluxcd.io/prune"
KUSTOMIZE_API: Final = "kustomize.config.k8s.io/v1beta1"
FLUX_API: Final = "kustomize.toolkit.fluxcd.io/v1"
FLUX_SOURCE_API: Final = "source.toolkit.fluxcd.io/v1"
ARGO_API: Final = "argoproj.io/v1alpha1"
WAVES: Final = "waves"
"""The folder listing every layer (`../crds`, ...): what tools that order by sync wave apply."""
FLUX_LAYERS: Final = "flux/layers"
ENTRY: Final = "fivespot"
"""The Flux entry Kustomization, and the Argo CD Application."""

PROTECTED_KINDS: Final = frozenset({"CustomResourceDefinition", "Namespace"})
"""Never pruned or deleted by Argo CD or Flux: a CRD takes every object of its kind with it, a
namespace everything in it."""
NO_PRUNE: Final = "Prune=false"
NEVER_DELETE: Final = (NO_PRUNE, "Delete=false")
SKIP_DRY_RUN: Final = "SkipDryRunOnMissingResource=true"
ARGOCD_CM: Final = "argocd-cm"
ARGOCD_CM_FIELD_MANAGER: Final = "fivespot-argocd-health"
"""The field manager fivespot's keys are applied to argocd-cm and argocd-cmd-params-cm with. It
must be fivespot's own: Argo CD's install is applied with kubectl's default manager (`kubectl`),
and a server-side apply under the same manager removes every key the other apply set (each apply
owns exactly what it sends). With a manager of its own each owner's keys survive the other's
apply, and a key both set to different values is a conflict, not a silent overwrite."""
ARGOCD_CM_APPLY: Final = (f"kubectl apply --server-side --field-manager={ARGOCD_CM_FIELD_MANAGER} "
                          "-f argocd/argocd-cm.health.yaml")
"""How to apply the health keys: docs/operations/gitops.md and the file's own comment say it."""
ARGOCD_CMD_PARAMS_CM: Final = "argocd-cmd-params-cm"
ARGOCD_CMD_PARAMS_FILE: Final = f"argocd/{ARGOCD_CMD_PARAMS_CM}.yaml"
ARGOCD_CMD_PARAMS_APPLY: Final = (f"kubectl apply --server-side --field-manager={ARGOCD_CM_FIELD_MANAGER} "
                                  f"-f {ARGOCD_CMD_PARAMS_FILE}")
"""How to apply the self-heal keys (then restart the application-controller: ARGOCD_CONTROLLER_RESTART)."""
ARGOCD_APPLICATION_CONTROLLER: Final = "argocd-application-controller"
ARGOCD_CONTROLLER_RESTART: Final = "kubectl -n {namespace} rollout restart statefulset " + ARGOCD_APPLICATION_CONTROLLER
"""The application-controller reads argocd-cmd-params-cm's keys only into its environment
(`configMapKeyRef`s in its StatefulSet), so only a restart puts new values in force."""
SELF_HEAL_TIMEOUT_S: Final = 5
SELF_HEAL_PARAMS: Final = {
    "controller.self.heal.timeout.seconds": str(SELF_HEAL_TIMEOUT_S),
    "controller.self.heal.backoff.timeout.seconds": "0",
}
"""A fixed self-heal timeout instead of Argo CD v3's exponential backoff (no backoff object when
its initial timeout is 0): the first self-heal after an operation waits until SELF_HEAL_TIMEOUT_S
after it finished, past the stale comparison right after a sync that would re-apply the commit,
git's value of a gated field included (decision record 0038)."""
DEFAULT_PROJECT: Final = "default"
IGNORE_DIFFERENCES_ALL: Final = "resource.customizations.ignoreDifferences.all"
"""The argocd-cm key whose `managedFieldsManagers` Argo CD leaves out of every Application's diff:
a field the capacity controller owns (the gated field, after its write) is then never drift to a
tenant's Application, so self-heal never reverts it (decision record 0029)."""
IGNORE_DIFFERENCES_PREFIX: Final = "resource.customizations.ignoreDifferences."
NULL_PARENT: Final = "{parent} | select(. == null)"
"""A jq path expression of Argo CD's ignoreDifferences: the parent of a gated field, when it is
null. Argo CD v3.6 leaves a field `managedFieldsManagers` names out of the diff by removing it from
the live and desired objects (util/argo/managedfields), and a map left empty by that removal
becomes `null`, not absent; the three-way diff's patch from the last-applied configuration (which
still holds the field) then deletes that parent, and the predicted object (no parent) differs from
the live one (`parent: null`): OutOfSync, though nothing but the ignored field differs. Deleting
the null parent from both sides makes them equal again (decision record 0029)."""


def decorate(artifacts: list[Artifact]) -> list[Artifact]:
    """Every object with its sync wave; objects of CRDs in this output skip the dry run; CRDs
    and namespaces are never pruned or deleted; `unpruned` artifacts are not pruned."""
    own_kinds = {(a.obj["spec"]["group"], a.obj["spec"]["names"]["kind"])
                 for a in artifacts if a.kind == "CustomResourceDefinition"}
    decorated = []
    for artifact in artifacts:
        obj = copy.deepcopy(artifact.obj)
        annotations = obj["metadata"].setdefault("annotations", {})
        annotations[SYNC_WAVE] = SYNC_WAVES[artifact.layer]
        options = []
        group = obj["apiVersion"].rpartition("/")[0]
        if (group, obj["kind"]) in own_kinds:
            options.append(SKIP_DRY_RUN)
        if obj["kind"] in PROTECTED_KINDS:
            options += NEVER_DELETE
            annotations[FLUX_PRUNE] = "disabled"
        elif artifact.unpruned:
            options.append(NO_PRUNE)
            annotations[FLUX_PRUNE] = "disabled"
        if options:
            annotations[SYNC_OPTIONS] = ",".join(options)
        obj["metadata"]["annotations"] = dict(sorted(annotations.items()))
        decorated.append(dataclasses.replace(artifact, obj=obj))
    return decorated


def tenant_namespaces(repo: Repo, artifacts: list[Artifact]) -> list[Artifact]:
    """The tenant namespaces the output writes into (schedules, the controllers' RoleBindings),
    created in the RBAC layer (a sync must not fail on `namespaces "agents" not found`); never
    pruned or deleted (`decorate`)."""
    names = sorted({a.obj["metadata"]["namespace"] for a in artifacts
                    if a.layer == SCHEDULES or a.unpruned} - {repo.namespace})
    return [Artifact(RBAC, f"{RBAC}/namespaces/{name}.namespace.yaml",
                     {"apiVersion": "v1", "kind": "Namespace",
                      "metadata": metadata(name, "fivespot-tenant")})
            for name in names]


def _kustomization(resources: list[str]) -> dict[str, Any]:
    return {"apiVersion": KUSTOMIZE_API, "kind": "Kustomization", "resources": resources}


def present_layers(artifacts: list[Artifact]) -> list[str]:
    return [layer for layer in LAYERS if any(a.layer == layer for a in artifacts)]


def kustomize_tree(repo: Repo, artifacts: list[Artifact]) -> list[Artifact]:
    layers = present_layers(artifacts)
    root = ["flux"] if repo.platform.spec.gitops.flux is not None else layers
    tree = [Artifact("", "kustomization.yaml", _kustomization(root)),
            Artifact("", f"{WAVES}/kustomization.yaml",
                     _kustomization([f"../{layer}" for layer in layers]))]
    for layer in layers:
        files = sorted(str(PurePosixPath(a.path).relative_to(layer)) for a in artifacts if a.layer == layer)
        tree.append(Artifact(layer, f"{layer}/kustomization.yaml", _kustomization(files)))
    return tree


# --- Argo CD -------------------------------------------------------------------------------------


def _group_kind(obj: dict[str, Any]) -> tuple[str, str]:
    return obj["apiVersion"].rpartition("/")[0], obj["kind"]


def reporting_kinds(artifacts: list[Artifact]) -> list[tuple[str, str]]:
    """(group, kind) of every CRD in the output whose objects get a status (a status subresource
    in its storage version): the kinds a controller reports on, and so the kinds with health."""
    return sorted((a.obj["spec"]["group"], a.obj["spec"]["names"]["kind"])
                  for a in artifacts if a.kind == "CustomResourceDefinition"
                  and any(v.get("storage") and "status" in (v.get("subresources") or {})
                          for v in a.obj["spec"]["versions"]))


def argocd_application(repo: Repo) -> list[Artifact]:
    argo = repo.platform.spec.gitops.argocd
    if argo is None:
        return []
    spec: dict[str, Any] = {
        "project": argo.project,
        "source": {"repoURL": argo.repo_url, "targetRevision": argo.target_revision,
                   "path": str(PurePosixPath(argo.path) / WAVES)},
        "destination": {"server": argo.destination_server, "namespace": repo.namespace},
        "syncPolicy": {
            "automated": {"prune": True, "selfHeal": True},
            "syncOptions": ["ServerSideApply=true", "RespectIgnoreDifferences=true", "PruneLast=true"],
            "retry": {"limit": 5, "backoff": {"duration": "10s", "factor": 2, "maxDuration": "3m"}},
        },
    }
    if repo.has_webhook and repo.platform.spec.webhook.certificate.mode.value == "self-managed":
        # What the webhook writes at run time: the caBundle it injects, and the certificates it
        # keeps in the Secret the output creates empty (RespectIgnoreDifferences: a sync keeps
        # the live values of these fields instead of applying the empty ones).
        spec["ignoreDifferences"] = [{
            "group": "admissionregistration.k8s.io", "kind": "ValidatingWebhookConfiguration",
            "name": WEBHOOK_CONFIGURATION,
            "jqPathExpressions": [".webhooks[]?.clientConfig.caBundle"],
        }, {
            "group": "", "kind": "Secret", "name": WEBHOOK_TLS_SECRET,
            "namespace": repo.namespace, "jsonPointers": ["/data"],
        }]
    application = {
        "apiVersion": ARGO_API, "kind": "Application",
        "metadata": {**metadata(ENTRY, "fivespot-gitops", argo.namespace,
                                annotations={COMPARE_OPTIONS: "ServerSideDiff=true"}),
                     "finalizers": ["resources-finalizer.argocd.argoproj.io"]},
        "spec": spec,
    }
    return [Artifact("", "argocd/application.yaml", application)]


def argocd_project(repo: Repo, artifacts: list[Artifact]) -> list[Artifact]:
    """The Application's AppProject, allowing exactly the repository, the namespaces and the
    kinds the output has (none when the project is Argo CD's `default`, which fivespot must not
    redefine: `compile` warns)."""
    argo = repo.platform.spec.gitops.argocd
    if argo is None or argo.project == DEFAULT_PROJECT:
        return []
    namespaces = sorted({a.obj["metadata"]["namespace"] for a in artifacts
                         if "namespace" in a.obj["metadata"]})
    cluster = sorted({_group_kind(a.obj) for a in artifacts if "namespace" not in a.obj["metadata"]})
    namespaced = sorted({_group_kind(a.obj) for a in artifacts if "namespace" in a.obj["metadata"]})
    project = {
        "apiVersion": ARGO_API, "kind": "AppProject",
        "metadata": {**metadata(argo.project, "fivespot-gitops", argo.namespace),
                     "finalizers": ["resources-finalizer.argocd.argoproj.io"]},
        "spec": {
            "description": "fivespot: exactly what its compiled output contains",
            "sourceRepos": [argo.repo_url],
            "destinations": [{"server": argo.destination_server, "namespace": n} for n in namespaces],
            "clusterResourceWhitelist": [{"group": g, "kind": k} for g, k in cluster],
            "namespaceResourceWhitelist": [{"group": g, "kind": k} for g, k in namespaced],
        },
    }
    return [Artifact("", "argocd/appproject.yaml", project)]


def null_parents(paths: list[str]) -> list[str]:
    """The jq path expressions (NULL_PARENT) of every parent of the gated `paths` but the object
    itself, deepest first."""
    parents = {".".join(path.split(".")[:end]) for path in paths for end in range(1, path.count(".") + 1)}
    return [NULL_PARENT.format(parent=f".{parent}")
            for parent in sorted(parents, key=lambda p: (-p.count("."), p))]


def null_parents_ignored(repo: Repo) -> dict[str, str]:
    """One `ignoreDifferences.<group>_<Kind>` key per CapacityConsumer kind: its gated fields'
    null parents (NULL_PARENT), so that an object whose parent map holds nothing but gated
    fields is not OutOfSync. Per kind, not in `.all`: Argo CD runs each jq expression on every
    object its key matches, at every comparison."""
    keys: dict[str, str] = {}
    for consumer in repo.consumers:
        spec = consumer.spec
        expressions = "".join(f"- '{e}'\n" for e in null_parents(list(spec.capacity_paths)))
        keys[f"{IGNORE_DIFFERENCES_PREFIX}{spec.group}_{spec.kind}"] = f"jqPathExpressions:\n{expressions}"
    return dict(sorted(keys.items()))


def _argocd_config_map(name: str, namespace: str, data: dict[str, str]) -> dict[str, Any]:
    """One of Argo CD's ConfigMaps, holding only `data` (the keys fivespot adds), labelled as
    Argo CD labels its own: it finds them by `app.kubernetes.io/part-of: argocd`."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/name": name,
                                    "app.kubernetes.io/part-of": "argocd"}},
            "data": data}


def argocd_health(repo: Repo, artifacts: list[Artifact]) -> list[Artifact]:
    """The health Lua as the keys of argocd-cm to add: apply it server-side under fivespot's own
    field manager (it then owns only these keys; ARGOCD_CM_FIELD_MANAGER says why it must be its
    own) or use it as a kustomize patch of the Argo CD install. Its labels are Argo CD's, which
    finds argocd-cm by `app.kubernetes.io/part-of: argocd`."""
    argo = repo.platform.spec.gitops.argocd
    if argo is None:
        return []
    config_map = _argocd_config_map(ARGOCD_CM, argo.namespace, {
        **health.argocd_health(reporting_kinds(artifacts), repo.has_webhook),
        IGNORE_DIFFERENCES_ALL: f"managedFieldsManagers:\n- {CAPACITY_CONTROLLER}\n",
        **null_parents_ignored(repo)})
    comment = (
        "fivespot's health checks, and the gated fields left out of every Application's diff\n"
        "(ignoreDifferences.all: what fivespot's capacity controller owns; ignoreDifferences of\n"
        "each gated kind: a gated field's parent left null by that), to add to Argo CD's\n"
        "argocd-cm (not synced by the Application).\n"
        f"Apply from the output folder: {ARGOCD_CM_APPLY}\n"
        f"The field manager must be fivespot's own ({ARGOCD_CM_FIELD_MANAGER}): under kubectl's\n"
        "default one, which Argo CD's own install uses, each apply removes the other's keys.\n"
        "Or add this file as a patch to your Argo CD install's kustomization.")
    return [Artifact("", "argocd/argocd-cm.health.yaml", config_map, comment)]


def argocd_cmd_params(repo: Repo) -> list[Artifact]:
    """SELF_HEAL_PARAMS as the keys of argocd-cmd-params-cm to add, applied like the health keys
    (ARGOCD_CMD_PARAMS_APPLY), unless `fixedSelfHealTimeout: false`."""
    argo = repo.platform.spec.gitops.argocd
    if argo is None or not argo.fixed_self_heal_timeout:
        return []
    config_map = _argocd_config_map(ARGOCD_CMD_PARAMS_CM, argo.namespace, dict(SELF_HEAL_PARAMS))
    comment = (
        f"Argo CD self-heals no sooner than {SELF_HEAL_TIMEOUT_S} s after an Application's last operation,\n"
        f"then every {SELF_HEAL_TIMEOUT_S} s, instead of its exponential backoff (whose first attempt waits\n"
        "for nothing and can re-apply the commit just synced, git's value of a gated field\n"
        "included). For every Application. Keys to add to Argo CD's argocd-cmd-params-cm (not\n"
        "synced by the Application); gitops.argocd.fixedSelfHealTimeout: false leaves this file out.\n"
        f"Apply from the output folder: {ARGOCD_CMD_PARAMS_APPLY}\n"
        "then restart the application-controller, which reads these keys only when it starts:\n"
        f"  {argocd_controller_restart(argo.namespace)}\n"
        f"A key your install already sets to another value is an apply conflict: keep one value.")
    return [Artifact("", ARGOCD_CMD_PARAMS_FILE, config_map, comment)]


def argocd_controller_restart(namespace: str) -> str:
    return ARGOCD_CONTROLLER_RESTART.format(namespace=namespace)


# --- Flux ----------------------------------------------------------------------------------------


def flux_source(repo: Repo) -> list[Artifact]:
    flux = repo.platform.spec.gitops.flux
    if flux is None or flux.url is None:
        return []
    ref = flux.source_ref
    spec: dict[str, Any] = {"interval": flux.interval, "url": flux.url}
    if ref.kind == "GitRepository":
        spec["ref"] = {"branch": flux.ref}
    else:
        spec["ref"] = {"tag": flux.ref}
    source = {"apiVersion": FLUX_SOURCE_API, "kind": ref.kind,
              "metadata": metadata(ref.name, "fivespot-gitops", ref.namespace), "spec": spec}
    return [Artifact("", f"flux/{ref.kind.lower()}.yaml", source)]


def _flux_kustomization(repo: Repo, name: str, path: str, spec: dict[str, Any]) -> dict[str, Any]:
    flux = repo.platform.spec.gitops.flux
    assert flux is not None
    return {
        "apiVersion": FLUX_API, "kind": "Kustomization",
        "metadata": metadata(name, "fivespot-gitops", flux.namespace),
        "spec": {
            "interval": flux.interval,
            "path": path,
            "prune": True,
            "sourceRef": {"kind": flux.source_ref.kind, "name": flux.source_ref.name,
                          "namespace": flux.source_ref.namespace},
            **spec,
        },
    }


def webhook_health_exprs() -> list[dict[str, str]]:
    return [{"apiVersion": "admissionregistration.k8s.io/v1",
             "kind": health.WEBHOOK_CONFIGURATION_KIND,
             "current": health.WEBHOOK_CONFIGURATION_CURRENT,
             "inProgress": health.WEBHOOK_CONFIGURATION_IN_PROGRESS}]


def flux_kustomizations(repo: Repo, artifacts: list[Artifact]) -> list[Artifact]:
    """The entry Kustomization (what a parent applies, with the source) and one Kustomization
    per layer, each waiting for its objects' health (kstatus) and depending on the one before."""
    flux = repo.platform.spec.gitops.flux
    if flux is None:
        return []
    root = PurePosixPath(flux.path)
    layers = []
    previous: str | None = None
    for layer in present_layers(artifacts):
        name = f"{ENTRY}-{layer}"
        spec: dict[str, Any] = {"timeout": "5m", "wait": True}
        if previous:
            spec["dependsOn"] = [{"name": previous}]
        if layer == WEBHOOK_CONFIG:
            spec["healthCheckExprs"] = webhook_health_exprs()
        layers.append(Artifact("", f"{FLUX_LAYERS}/{name}.yaml",
                               _flux_kustomization(repo, name, str(root / layer), spec)))
        previous = name
    if not layers:
        return []
    entry = _flux_kustomization(repo, ENTRY, str(root / FLUX_LAYERS),
                                {"timeout": f"{5 * len(layers)}m", "wait": True})
    top = flux_source(repo) + [Artifact("", f"flux/{ENTRY}.yaml", entry)]
    return [
        *top,
        Artifact("", "flux/kustomization.yaml",
                 _kustomization(sorted(PurePosixPath(a.path).name for a in top))),
        *layers,
        Artifact("", f"{FLUX_LAYERS}/kustomization.yaml",
                 _kustomization(sorted(PurePosixPath(a.path).name for a in layers))),
    ]


def emit(repo: Repo, artifacts: list[Artifact]) -> list[Artifact]:
    """The layout files around the (already decorated) objects."""
    return (kustomize_tree(repo, artifacts) + argocd_application(repo)
            + argocd_project(repo, artifacts) + argocd_health(repo, artifacts) + argocd_cmd_params(repo)
            + flux_kustomizations(repo, artifacts))

