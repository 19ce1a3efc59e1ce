"""`fivespot install` / `fivespot uninstall`: put a compiled OUT_DIR on a cluster, in its own order.

The compiled output declares its order itself (each object's Argo CD sync wave; the Flux
Kustomizations follow the same chain). Installing is what a GitOps tool does with it, without the
GitOps tool: server-side apply of each wave, then wait until the wave is healthy (CRDs
Established, Deployments Available) before the next one. `manifests` reads and orders the output
and `health` judges live objects (both pure); `installer` is the thin shell that talks to the API
server through the runtime's client; `cli` is the command line.
"""
