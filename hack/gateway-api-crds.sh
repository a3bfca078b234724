#!/usr/bin/env bash
# Copies the Gateway API's standard CustomResourceDefinitions from the module
# go.mod pins, sigs.k8s.io/gateway-api, into config/crd/gateway-api: the
# operator serves the Gateway API release it was built against, and these are
# its CRDs byte for byte. The channel's ValidatingAdmissionPolicy is left out:
# it guards other installs, not ours.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
src=$(go list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)/config/crd/standard
out=config/crd/gateway-api
mkdir -p "$out"
rm -f "$out"/*.yaml
for f in "$src"/gateway.networking.k8s.io_*.yaml; do
  case $f in *_vap_*) continue ;; esac
  install -m 0644 "$f" "$out/$(basename "$f")"
done
