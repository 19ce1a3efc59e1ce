"""Health that Argo CD and Flux read the same way: Argo CD health Lua for every fivespot kind, and
the Flux CEL health check for the webhook configuration.

Every fivespot controller reports kstatus conditions (fluxcd/cli-utils, which Flux `wait` and
`healthChecks` run): Ready=True when settled, Reconciling=True while on its way, Stalled=True when
a person must act, and `observedGeneration`. So one Lua serves every fivespot kind a controller
reports on, and it follows the kstatus rules in their order, mapping Current -> Healthy,
InProgress -> Progressing, Failed -> Degraded (docs/operations/health.md has the table
per phase). It differs from kstatus in one place on purpose: an object with no status at all is
Progressing (its controller has not reported yet), where kstatus, which cannot know that a status
will come, says Current.

A kind whose CRD has no status subresource (the TenantCapacityLimit params of the admission
policies) never gets a status: nothing reports on it. It gets no health key at all, so Argo CD
treats it as it treats a ConfigMap (no health; a sync wave does not wait on it). With the kstatus
Lua it would be Progressing forever, and real Argo CD's sync never got past the admission wave
(`waiting for healthy state of policy.5spot.finos.org/TenantCapacityLimit/...`).

The webhook configuration is healthy only once every webhook in it has a caBundle: until then the
API server cannot verify the webhook's certificate and, with failurePolicy Fail, refuses every
write the webhook guards. Argo CD has no health for that kind and kstatus calls it Current at
once, so both get an explicit check, limited to fivespot's own configuration.
"""

from __future__ import annotations

from typing import Final

from fivespot.compiler.emit.base import PART_OF

HEALTH_KEY_PREFIX: Final = "resource.customizations.health."
WEBHOOK_CONFIGURATION_GROUP: Final = "admissionregistration.k8s.io"
WEBHOOK_CONFIGURATION_KIND: Final = "ValidatingWebhookConfiguration"

KSTATUS_LUA: Final = """\
-- fivespot: kstatus rules (Ready / Reconciling / Stalled, observedGeneration) as Argo CD health.
local hs = {status = "Progressing", message = "waiting for the controller to report a status"}
if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then
  hs.message = "being deleted"
  return hs
end
if obj.status == nil then
  return hs
end
local generation = obj.metadata and obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and observed ~= nil and observed ~= generation then
  hs.message = "the controller has not yet observed generation " .. tostring(generation)
  return hs
end
local phase = ""
if obj.status.phase ~= nil then
  phase = tostring(obj.status.phase) .. ": "
end
local ready = nil
for _, c in ipairs(obj.status.conditions or {}) do
  if c.type == "Reconciling" and c.status == "True" then
    return {status = "Progressing", message = phase .. (c.message or c.reason or "reconciling")}
  end
  if c.type == "Stalled" and c.status == "True" then
    return {status = "Degraded", message = phase .. (c.message or c.reason or "stalled")}
  end
  if c.type == "Ready" and ready == nil then
    ready = c
  end
end
if ready ~= nil then
  local text = phase .. (ready.message or ready.reason or "")
  if ready.status == "True" then
    return {status = "Healthy", message = text}
  end
  return {status = "Progressing", message = text}
end
return {status = "Healthy", message = phase .. "current"}
"""
"""One Lua for every fivespot kind a controller reports on (ScheduledCapacity, ScheduledMachine,
every provider kind): their controllers all speak kstatus."""

WEBHOOK_CONFIGURATION_LUA: Final = f"""\
-- fivespot: its webhook configuration is healthy once every webhook has a caBundle.
local labels = (obj.metadata and obj.metadata.labels) or {{}}
if labels["app.kubernetes.io/part-of"] ~= "{PART_OF}" then
  return {{status = "Healthy", message = "not fivespot's"}}
end
local missing = {{}}
for _, hook in ipairs(obj.webhooks or {{}}) do
  local config = hook.clientConfig or {{}}
  if config.caBundle == nil or config.caBundle == "" then
    table.insert(missing, hook.name or "?")
  end
end
if #missing > 0 then
  return {{status = "Progressing", message = "waiting for the caBundle of " ..
    table.concat(missing, ", ") .. " (until it is injected the API server cannot call the webhook)"}}
end
return {{status = "Healthy", message = "every webhook has a caBundle"}}
"""

WEBHOOK_CONFIGURATION_CURRENT: Final = (
    "webhooks.all(w, has(w.clientConfig.caBundle) && w.clientConfig.caBundle != '')")
"""Flux healthCheckExprs `current` for fivespot's webhook configuration (the input is the object)."""
WEBHOOK_CONFIGURATION_IN_PROGRESS: Final = (
    "webhooks.exists(w, !has(w.clientConfig.caBundle) || w.clientConfig.caBundle == '')")


def health_key(group: str, kind: str) -> str:
    """The argocd-cm key of a kind's health Lua (the `<group>_<kind>` form Argo CD reads)."""
    return f"{HEALTH_KEY_PREFIX}{group}_{kind}"


def argocd_health(kinds: list[tuple[str, str]], with_webhook: bool) -> dict[str, str]:
    """The argocd-cm data: one health Lua per (group, kind) with a status (kinds without one get
    no key: see the module's docstring), and the webhook configuration's."""
    data = {health_key(group, kind): KSTATUS_LUA for group, kind in kinds}
    if with_webhook:
        data[health_key(WEBHOOK_CONFIGURATION_GROUP, WEBHOOK_CONFIGURATION_KIND)] = \
            WEBHOOK_CONFIGURATION_LUA
    return dict(sorted(data.items()))

