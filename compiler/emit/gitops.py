"""The GitOps layout: a kustomize tree, Argo CD sync waves and an Application, Flux Kustomizations.

Order matters on a live cluster: CRDs before anything that uses them, the namespace and RBAC
before workloads, admission before the workloads it guards. Argo CD gets that from sync-wave
annotations on every object (one Application, server-side apply, the webhook caBundle ignored
so self-managed certificates never leave it OutOfSync); Flux from one Kustomization per layer
chained with dependsOn and health checks, since a Flux dry run fails when a CRD arrives in the
same Kustomization as its objects.
"""

from __future__ import annotations

import copy
from pathlib import PurePosixPath
from typing import Any, Final

from api.identities import WEBHOOK_CONFIGURATION
from compiler.emit.base import ADMISSION, CRDS, LAYERS, SYNC_WAVES, WORKLOADS, Artifact, metadata
from compiler.repo import Repo

SYNC_WAVE: Final = "argocd.argoproj.io/sync-wave"
SYNC_OPTIONS: Final = "argocd.argoproj.io/sync-options"
KUSTOMIZE_API: Final = "kustomize.config.k8s.io/v1beta1"
FLUX_API: Final = "kustomize.toolkit.fluxcd.io/v1"
ARGO_API: Final = "argoproj.io/v1alpha1"


def decorate(artifacts: list[Artifact]) -> list[Artifact]:
    """Every object with its Argo CD sync wave; objects of CRDs in this output skip the dry run."""
    own_kinds = {(a.obj["spec"]["group"], a.obj["spec"]["names"]["kind"])
                 for a in artifacts if a.kind == "CustomResourceDefinition"}
    decorated = []
    for artifact in artifacts:
        obj = copy.deepcopy(artifact.obj)
        annotations = obj["metadata"].setdefault("annotations", {})
        annotations[SYNC_WAVE] = SYNC_WAVES[artifact.layer]
        group = obj["apiVersion"].rpartition("/")[0]
        if (group, obj["kind"]) in own_kinds:
            annotations[SYNC_OPTIONS] = "SkipDryRunOnMissingResource=true"
        obj["metadata"]["annotations"] = dict(sorted(annotations.items()))
        decorated.append(Artifact(artifact.layer, artifact.path, obj))
    return decorated


def _kustomization(resources: list[str]) -> dict[str, Any]:
    return {"apiVersion": KUSTOMIZE_API, "kind": "Kustomization", "resources": resources}


def kustomize_tree(artifacts: list[Artifact]) -> list[Artifact]:
    layers = [layer for layer in LAYERS if any(a.layer == layer for a in artifacts)]
    tree = [Artifact("", "kustomization.yaml", _kustomization(layers))]
    for layer in layers:
        files = sorted(str(PurePosixPath(a.path).relative_to(layer)) for a in artifacts if a.layer == layer)
        tree.append(Artifact(layer, f"{layer}/kustomization.yaml", _kustomization(files)))
    return tree


def argocd_application(repo: Repo) -> list[Artifact]:
    argo = repo.platform.spec.gitops.argocd
    if argo is None:
        return []
    spec: dict[str, Any] = {
        "project": argo.project,
        "source": {"repoURL": argo.repo_url, "targetRevision": argo.target_revision,
                   "path": argo.path},
        "destination": {"server": argo.destination_server, "namespace": repo.namespace},
        "syncPolicy": {
            "automated": {"prune": True, "selfHeal": True},
            "syncOptions": ["ServerSideApply=true", "RespectIgnoreDifferences=true"],
            "retry": {"limit": 5, "backoff": {"duration": "10s", "factor": 2, "maxDuration": "3m"}},
        },
    }
    if repo.has_webhook and repo.platform.spec.webhook.certificate.mode.value == "self-managed":
        spec["ignoreDifferences"] = [{
            "group": "admissionregistration.k8s.io", "kind": "ValidatingWebhookConfiguration",
            "name": WEBHOOK_CONFIGURATION,
            "jqPathExpressions": [".webhooks[]?.clientConfig.caBundle"],
        }]
    application = {
        "apiVersion": ARGO_API, "kind": "Application",
        "metadata": {**metadata("fivespot", "fivespot-gitops", argo.namespace),
                     "finalizers": ["resources-finalizer.argocd.argoproj.io"]},
        "spec": spec,
    }
    return [Artifact("", "argocd/application.yaml", application)]


def flux_kustomizations(repo: Repo, artifacts: list[Artifact]) -> list[Artifact]:
    flux = repo.platform.spec.gitops.flux
    if flux is None:
        return []
    layers = [layer for layer in LAYERS if any(a.layer == layer for a in artifacts)]
    out = []
    previous: str | None = None
    for layer in layers:
        name = f"fivespot-{layer}"
        spec: dict[str, Any] = {
            "interval": flux.interval,
            "path": str(PurePosixPath(flux.path) / layer),
            "prune": True,
            "sourceRef": {"kind": flux.source_ref.kind, "name": flux.source_ref.name,
                          "namespace": flux.source_ref.namespace},
            "timeout": "5m",
            "wait": layer in (CRDS, ADMISSION),
        }
        if previous:
            spec["dependsOn"] = [{"name": previous}]
        if layer == WORKLOADS:
            spec["healthChecks"] = [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": a.name,
                 "namespace": repo.namespace}
                for a in artifacts if a.layer == WORKLOADS and a.kind == "Deployment"
            ]
        out.append(Artifact("", f"flux/{name}.yaml", {
            "apiVersion": FLUX_API, "kind": "Kustomization",
            "metadata": metadata(name, "fivespot-gitops", flux.namespace), "spec": spec}))
        previous = name
    if out:
        out.append(Artifact("", "flux/kustomization.yaml",
                            _kustomization(sorted(PurePosixPath(a.path).name for a in out))))
    return out


def emit(repo: Repo, artifacts: list[Artifact]) -> list[Artifact]:
    """The layout files around the (already decorated) objects."""
    return kustomize_tree(artifacts) + argocd_application(repo) + flux_kustomizations(repo, artifacts)
