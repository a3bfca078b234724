#!/usr/bin/env bash
# Installs the sidecar-injection webhook for an operator that runs on the host
# (make run, hack/e2e.sh): the operator's namespace, which holds the Secret with
# the webhook's generated certificate, and config/webhook/manifests.yaml (the
# injector, and the validators of EnvoyConfigs, Watchers and PodSets) with url clientConfigs,
# https://localhost:PORT/<path>, instead of the Service. The operator puts its CA into the caBundle once it runs with
#   --webhook-bind-address 127.0.0.1:PORT --webhook-cert-dns-name localhost
#   --webhook-cert-write-files --webhook-cert-dir DIR
#
#   hack/webhook-local.sh PORT          (KUBECONFIG names the cluster)
#
# hack/freeport picks a free PORT.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
port=${1:?usage: hack/webhook-local.sh PORT}

"$ROOT/bin/kubectl" create namespace kube-envoy-controller --dry-run=client -o yaml |
  "$ROOT/bin/kubectl" apply -f - >/dev/null
# Each webhook's clientConfig.service (name, namespace, path) becomes
# url: https://localhost:PORT<path>.
awk -v base="https://localhost:$port" '
  /^ *service:$/ { indent = substr($0, 1, index($0, "s") - 1); in_service = 1; next }
  in_service && /^ *(name|namespace|port):/ { next }
  in_service && /^ *path:/ { sub(/^ *path: */, ""); print indent "url: " base $0; in_service = 0; next }
  { in_service = 0; print }
' "$ROOT/config/webhook/manifests.yaml" |
  "$ROOT/bin/kubectl" apply --server-side --force-conflicts -f - >/dev/null
