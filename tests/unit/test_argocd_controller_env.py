"""The local Argo CD's application-controller gets its environment from ConfigMap keys the way Argo
CD's install maps them (`fivespot.devcluster.gitops_engines.config_map_env`): the self-heal keys
fivespot's output adds to argocd-cmd-params-cm must reach it as they would reach a real pod."""

from __future__ import annotations

from typing import Any

import pytest

from fivespot.devcluster.gitops_engines import EngineExited, config_map_env

pytestmark = pytest.mark.unit


def _ref(env: str, config_map: str, key: str, optional: bool = True) -> dict[str, Any]:
    return {"name": env, "valueFrom": {"configMapKeyRef": {"name": config_map, "key": key,
                                                           "optional": optional}}}


def _statefulset(*env: dict[str, Any]) -> dict[str, Any]:
    """The shape of Argo CD's argocd-application-controller StatefulSet, with `env`."""
    return {"spec": {"template": {"spec": {"containers": [
        {"name": "argocd-application-controller", "env": [{"name": "HOME", "value": "/home/argocd"}, *env]},
        {"name": "sidecar", "env": [_ref("SIDECAR", "argocd-cmd-params-cm", "controller.self.heal.timeout.seconds")]},
    ]}}}}


SELF_HEAL = (_ref("ARGOCD_APPLICATION_CONTROLLER_SELF_HEAL_TIMEOUT_SECONDS", "argocd-cmd-params-cm",
                  "controller.self.heal.timeout.seconds"),
             _ref("ARGOCD_APPLICATION_CONTROLLER_SELF_HEAL_BACKOFF_TIMEOUT_SECONDS", "argocd-cmd-params-cm",
                  "controller.self.heal.backoff.timeout.seconds"),
             _ref("ARGOCD_RECONCILIATION_TIMEOUT", "argocd-cm", "timeout.reconciliation"))


def test_each_key_a_config_map_holds_sets_the_variable_the_install_maps_it_to_and_nothing_else() -> None:
    env = config_map_env(_statefulset(*SELF_HEAL), "argocd-application-controller", {
        "argocd-cmd-params-cm": {"controller.self.heal.timeout.seconds": "5",
                                 "controller.self.heal.backoff.timeout.seconds": "0",
                                 "controller.unmapped": "x"},
        "argocd-cm": {"timeout.reconciliation": "180s"}})
    assert env == {"ARGOCD_APPLICATION_CONTROLLER_SELF_HEAL_TIMEOUT_SECONDS": "5",
                   "ARGOCD_APPLICATION_CONTROLLER_SELF_HEAL_BACKOFF_TIMEOUT_SECONDS": "0",
                   "ARGOCD_RECONCILIATION_TIMEOUT": "180s"}


def test_an_optional_key_the_config_map_lacks_leaves_its_variable_unset() -> None:
    env = config_map_env(_statefulset(*SELF_HEAL), "argocd-application-controller",
                         {"argocd-cmd-params-cm": {}})
    assert env == {}


def test_a_required_key_the_config_map_lacks_is_an_error_naming_it() -> None:
    required = _ref("ARGOCD_X", "argocd-cmd-params-cm", "controller.x", optional=False)
    with pytest.raises(EngineExited, match="ARGOCD_X needs key 'controller.x' of ConfigMap argocd-cmd-params-cm"):
        config_map_env(_statefulset(required), "argocd-application-controller", {})
