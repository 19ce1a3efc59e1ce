#!/usr/bin/env bash
# The provider guide's step 2 as "a shell loop with kubectl": for every object of its kind,
# spec.enabled becomes status.active. Event-driven (kubectl's watch, relisted when the watch
# ends), publishing what the guide recommends: observedGeneration, a Ready condition, and a
# lastTransitionTime that moves only when active flips. Run it as the provider's ServiceAccount
# (rbac.yaml): it reads its kind and writes only its /status.
#
#   provider.sh [RESOURCE]        RESOURCE: the kind's plural, default desktoggles
set -euo pipefail
resource="${1:-desktoggles}"
fields='{.metadata.namespace}|{.metadata.name}|{.metadata.generation}|{.spec.enabled}|{.status.active}|{.status.observedGeneration}|{.status.lastTransitionTime}{"\n"}'

publish() {  # namespace name generation enabled active observed since
  local want=false
  [ "$4" = "true" ] && want=true
  if [ "$5" = "$want" ] && [ "$6" = "$3" ]; then
    return 0  # already published for this generation
  fi
  local now since
  now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  since="$now"
  if [ "$5" = "$want" ] && [ -n "$7" ]; then
    since="$7"  # active did not flip: keep its lastTransitionTime
  fi
  kubectl -n "$1" patch "$resource" "$2" --subresource=status --type=merge -p \
    "{\"status\":{\"active\":$want,\"observedGeneration\":$3,\"lastTransitionTime\":\"$since\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"Reconciled\",\"message\":\"manual toggle applied\",\"lastTransitionTime\":\"$since\"}]}}" \
    >/dev/null || echo "provider.sh: could not publish $1/$2; the next event retries" >&2
}

while true; do
  kubectl get "$resource" --all-namespaces --watch -o "jsonpath=$fields" |
    while IFS='|' read -r namespace name generation enabled active observed since; do
      [ -n "$name" ] && publish "$namespace" "$name" "$generation" "$enabled" "$active" "$observed" "$since"
    done
  sleep 1  # the watch ended (the server closes it every few minutes): list and watch again
done
