"""What `fivespot compile` (and `--check`) warns about: output that is valid but will hurt.

A warning does not fail the compile; it names the file, the field and what will happen, in the
same `FILE:LINE:COL: field: message` shape as an error, so CI logs and editors treat both alike.
- The webhook's NetworkPolicy with no `allowedSources`: the API server cannot reach the webhook,
  so admission through it is refused (failurePolicy Fail) or skipped (Ignore) until they are set.
- An Argo CD Application in the `default` project: no AppProject is emitted (fivespot must not
  redefine Argo CD's own), so the Application may sync anything anywhere.
- A minKubernetesVersion older than the supported range (fivespot/policies/kubeversions.py): nothing is
  known or tested of those API servers.
- A minKubernetesVersion older than ValidatingAdmissionPolicy v1 (enforcement `webhook`): the
  author-rights policies are not compiled, so nothing checks that a ScheduledCapacity's or a
  ScheduledMachine's author may make the writes the controllers make for them (decision 0024).
- A CRD that the previous output had and this one does not: deleting a CRD deletes every object
  of its kind. The compiled CRDs are marked so Argo CD and Flux never prune or delete them, so
  the CRD stays in the cluster; the warning says so, and how to remove it once it is unused.
- A namespace that the previous output made a tenant and this one does not: the controllers'
  RoleBindings there are not pruned (the capacity controller hands the namespace's capacity back
  to 0 with its, the audit controller reports its objects with its); the warning names them, and
  says when to delete them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml

from fivespot.commandline import docs
from fivespot.commandline.yamlbounds import MAX_FILE_BYTES, YamlTooLarge, load_all
from fivespot.compiler.diagnostics import Diagnostic, Location
from fivespot.compiler.emit import rbac
from fivespot.compiler.emit.base import CRDS, RBAC
from fivespot.compiler.emit.gitops import DEFAULT_PROJECT
from fivespot.compiler.repo import Repo
from fivespot.compiler.spec import FailurePolicy
from fivespot.policies import kubeversions


def _platform_location(repo: Repo) -> Location:
    return repo.sources.get(("Platform", repo.platform.metadata.name), Location("platform.yaml", 1, 1))


def network_policy(repo: Repo) -> list[Diagnostic]:
    settings = repo.platform.spec.webhook
    if not repo.has_webhook or not settings.network_policy.enabled or settings.network_policy.allowed_sources:
        return []
    effect = ("every ScheduledCapacity write and every capacity write the target guard vets will "
              "be refused (failurePolicy Fail)" if settings.failure_policy is FailurePolicy.FAIL else
              "the webhook's checks will be skipped (failurePolicy Ignore) and every capacity write "
              "the target guard vets refused (the guard always fails closed)")
    return [Diagnostic(_platform_location(repo), "spec.webhook.networkPolicy.allowedSources",
                       "unset: the webhook's NetworkPolicy admits nobody on its serving port, so "
                       f"the API server cannot call it and {effect} until you name the API "
                       f"server's addresses ({docs.WHO_MAY_CALL_THE_WEBHOOK})")]


def argocd_project(repo: Repo) -> list[Diagnostic]:
    argo = repo.platform.spec.gitops.argocd
    if argo is None or argo.project != DEFAULT_PROJECT:
        return []
    return [Diagnostic(_platform_location(repo), "spec.gitops.argocd.project",
                       "is Argo CD's default project, which allows every repository, namespace and "
                       "kind, and which fivespot does not redefine: name a project of fivespot's "
                       "own to get an AppProject limited to what the output contains")]


def _crds(files: Mapping[str, bytes]) -> dict[str, str]:
    """CRD file path -> kind, for every CRD file in an output tree."""
    found: dict[str, str] = {}
    for path, content in files.items():
        if not path.startswith(f"{CRDS}/") or path.endswith("/kustomization.yaml"):
            continue
        found[path] = _crd_kind(content) or Path(path).stem
    return found


def _crd_kind(content: bytes) -> str | None:
    """The kind a CRD file of the previous output defines, if it can be read: that output is
    committed, so it is bounded as any YAML a pull request brings (`yamlbounds`)."""
    if len(content) > MAX_FILE_BYTES:
        return None
    try:
        return str(load_all(content.decode("utf-8", errors="replace"))[0]["spec"]["names"]["kind"])
    except (yaml.YAMLError, YamlTooLarge, KeyError, TypeError, IndexError):
        return None


def dropped_crds(out_dir: Path, previous: Mapping[str, bytes],
                 files: Mapping[str, bytes]) -> list[Diagnostic]:
    """One warning per CRD the previous output had and the new one has not."""
    before, after = _crds(previous), _crds(files)
    warnings = []
    for path in sorted(set(before) - set(after)):
        kind, name = before[path], Path(path).stem
        warnings.append(Diagnostic(
            Location(str(out_dir / path), 1, 1), "",
            f"the output no longer has the CRD {name} (kind {kind}). Deleting a CRD deletes every "
            f"{kind} in the cluster, so Argo CD and Flux leave it in place (it was compiled with "
            f"Prune=false,Delete=false and prune: disabled); once `kubectl get {name} -A` lists "
            f"nothing you still need, delete it with `kubectl delete crd {name}`"))
    return warnings


def _tenant_bindings(files: Mapping[str, bytes]) -> dict[str, list[str]]:
    """Tenant namespace -> the controllers' RoleBindings in it (`rbac.tenant_identity`), by the
    paths an output tree holds them at."""
    found: dict[str, list[str]] = {}
    for path in sorted(files):
        for name in rbac.TENANT_ROLES:
            folder, _, file = path.rpartition("/")
            if file == f"{name}.rolebinding.yaml" and folder.startswith(f"{RBAC}/") \
                    and folder.count("/") == 1:
                found.setdefault(folder.removeprefix(f"{RBAC}/"), []).append(name)
    return found


def dropped_tenant_bindings(out_dir: Path, previous: Mapping[str, bytes],
                            files: Mapping[str, bytes]) -> list[Diagnostic]:
    """One warning per namespace the previous output held the controllers' tenant RoleBindings
    in and the new one does not."""
    before, after = _tenant_bindings(previous), _tenant_bindings(files)
    warnings = []
    for namespace in sorted(set(before) - set(after)):
        names = before[namespace]
        path = rbac.tenant_binding_path(namespace, names[0])
        warnings.append(Diagnostic(
            Location(str(out_dir / path), 1, 1), "",
            f"namespace {namespace} is no longer in any TenantPolicy. Its RoleBindings "
            f"{', '.join(names)} stay in the cluster (compiled with Prune=false and prune: "
            "disabled): with them the capacity controller hands the namespace's capacity back to "
            "0 and the audit controller reports its ScheduledCapacities. Once `kubectl -n "
            f"{namespace} get scheduledcapacities` lists none, delete them with `kubectl -n "
            f"{namespace} delete rolebinding {' '.join(names)}`"))
    return warnings


def untested_kubernetes(repo: Repo) -> list[Diagnostic]:
    """A minKubernetesVersion older than the supported range: the output is checked as the
    oldest supported version would take it, which says nothing of older API servers."""
    wanted = repo.platform.spec.min_kubernetes_version
    if repo.platform.spec.min_minor >= kubeversions.OLDEST.number:
        return []
    return [Diagnostic(_platform_location(repo), "spec.minKubernetesVersion",
                       f"{wanted} is older than the Kubernetes versions fivespot supports "
                       f"({kubeversions.SUPPORTED_RANGE}): CEL costs and features are checked as "
                       f"{kubeversions.OLDEST.minor}'s API server takes them, and nothing is "
                       f"tested against {wanted}")]


def unchecked_authors(repo: Repo) -> list[Diagnostic]:
    """Clusters without ValidatingAdmissionPolicy get no author-rights policies: say so."""
    if repo.platform.spec.serves_vaps or not (repo.has_capacity or repo.has_machines):
        return []
    return [Diagnostic(_platform_location(repo), "spec.minKubernetesVersion",
                       f"{repo.platform.spec.min_kubernetes_version} has no "
                       "ValidatingAdmissionPolicy v1 (Kubernetes 1.30), so the author-rights "
                       "policies are not compiled: nothing checks that the author of a "
                       "ScheduledCapacity may patch its target, or of a ScheduledMachine may "
                       "create its Machine, bootstrap and infrastructure objects, and a user "
                       "who may create one gets those writes made with the controller's "
                       "identity; raise minKubernetesVersion to 1.30 or newer")]


def compile_warnings(repo: Repo, out_dir: Path, previous: Mapping[str, bytes],
                     files: Mapping[str, bytes]) -> list[Diagnostic]:
    """Every warning for compiling `repo` to `files` where `previous` was."""
    return (network_policy(repo) + argocd_project(repo) + untested_kubernetes(repo)
            + unchecked_authors(repo) + dropped_crds(out_dir, previous, files)
            + dropped_tenant_bindings(out_dir, previous, files))
