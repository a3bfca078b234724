#!/usr/bin/env bash
# Fails when `make generate` changes anything: the committed deepcopy code,
# CRDs, RBAC, webhook configuration or typed clients (pkg/generated) no longer
# match the markers in the Go code.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
snapshot() {
  find api config/crd config/rbac config/webhook pkg/generated -type f \( -name 'zz_generated.*.go' -o -name '*.yaml' -o -path 'pkg/generated/*' \) -print0 |
    sort -z | xargs -0 sha256sum
}
before=$(snapshot)
make --no-print-directory generate >/dev/null
after=$(snapshot)
if [[ $before != "$after" ]]; then
  echo "Generated files were stale; 'make generate' changed:" >&2
  diff <(echo "$before") <(echo "$after") | grep '^[<>]' | awk '{print "  " $3}' | sort -u >&2
  echo "Commit the regenerated files." >&2
  exit 1
fi
