#!/usr/bin/env bash
# fivespot on a kind cluster, for users with Docker: create the cluster (unless it exists), load the
# image `make image` built into its nodes, compile CONFIG_DIR and install it, in wave order.
#
#   image/kind.sh CONFIG_DIR            (or: make kind CONFIG=CONFIG_DIR)
#
# Environment: KIND_CLUSTER (default fivespot), KIND (the kind binary, default kind), FIVESPOT
# (default .venv/bin/fivespot, else fivespot on PATH), OUT (default build/kind-out), ARCHIVE
# (default the docker archive in build/image). Paths given (CONFIG_DIR, OUT, ARCHIVE) are taken
# from where the script is called; the defaults are the repo's.
# The image must be the one the compiled Deployments name: leave Platform.spec.image unset (its
# default is what `make image` builds) or set it to build/image's reference.
set -euo pipefail
CONFIG_DIR=${1:?usage: image/kind.sh CONFIG_DIR}
[ -d "$CONFIG_DIR" ] || { echo "$CONFIG_DIR: no such config repo" >&2; exit 2; }
CONFIG_DIR=$(cd "$CONFIG_DIR" && pwd)   # paths given are the caller's; the rest the repo's
absolute() { printf '%s/%s' "$(cd "$(dirname "$1")" && pwd)" "$(basename "$1")"; }
[ -z "${OUT:-}" ] || OUT=$(absolute "$OUT")
[ -z "${ARCHIVE:-}" ] || ARCHIVE=$(absolute "$ARCHIVE")
[[ "${FIVESPOT:-}" != */* ]] || FIVESPOT=$(absolute "$FIVESPOT")
cd "$(dirname "$0")/.."
CLUSTER=${KIND_CLUSTER:-fivespot}
KIND=${KIND:-kind}
OUT=${OUT:-build/kind-out}
if [ -z "${FIVESPOT:-}" ]; then
  if [ -x .venv/bin/fivespot ]; then FIVESPOT=.venv/bin/fivespot; else FIVESPOT=fivespot; fi
fi
ARCHIVE=${ARCHIVE:-$(ls build/image/fivespot-*.docker.tar 2>/dev/null | head -1 || true)}
if [ -z "$ARCHIVE" ]; then
  echo "no image archive in build/image: run \`make image\` first" >&2
  exit 2
fi
if ! "$KIND" get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  "$KIND" create cluster --name "$CLUSTER"
fi
"$KIND" load image-archive "$ARCHIVE" --name "$CLUSTER"
"$FIVESPOT" compile "$CONFIG_DIR" --out "$OUT"
"$FIVESPOT" install "$OUT" --context "kind-$CLUSTER"
