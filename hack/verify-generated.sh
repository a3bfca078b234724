#!/usr/bin/env bash
# Fails when the committed generated files (deepcopy code, CRDs, RBAC, webhook
# configuration, typed clients in pkg/generated) differ from what `make generate` produces from the markers in
# the Go code, or when one of them would no longer be produced at all (the
# CRD of a deleted type, say). It generates into a temporary copy of the
# source tree and never changes this one.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# generated lists the generated files under a tree, relative to it.
generated() {
  (cd "$1" && find api config/crd/bases config/rbac config/webhook pkg/generated -type f \
    \( -name 'zz_generated.*.go' -o -path 'config/crd/bases/*.yaml' \
    -o -path config/rbac/role.yaml -o -path config/webhook/manifests.yaml \
    -o -path 'pkg/generated/*' \) | sort)
}

copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
# The copy: everything but the tools, local clusters and VCS data, with its
# generated files removed, so that only what generation produces is there.
tar -C "$ROOT" --exclude=./bin --exclude=./tmp --exclude=./.git -cf - . | tar -C "$copy" -xf -
ln -s "$ROOT/bin" "$copy/bin"
generated "$copy" | (cd "$copy" && xargs -r rm -f)
# -o: controller-gen is taken as it is in bin/, never rebuilt from the copy.
if ! make -C "$copy" --no-print-directory -o "$ROOT/bin/controller-gen" BIN="$ROOT/bin" generate >"$copy/.generate.log" 2>&1; then
  cat "$copy/.generate.log" >&2
  echo "make generate failed in a copy of the tree" >&2
  exit 1
fi

stale=0
while read -r f; do
  if [[ ! -e $ROOT/$f ]]; then
    echo "  missing: $f (generation produces it)" >&2
    stale=1
  elif [[ ! -e $copy/$f ]]; then
    echo "  not produced by generation any more: $f" >&2
    stale=1
  elif ! cmp -s "$ROOT/$f" "$copy/$f"; then
    echo "  differs from what generation produces: $f" >&2
    diff -u "$ROOT/$f" "$copy/$f" | head -n 20 | sed 's/^/    /' >&2 || true
    stale=1
  fi
done < <({ generated "$ROOT"; generated "$copy"; } | sort -u)
if [[ $stale -ne 0 ]]; then
  echo "Generated files are stale: run 'make generate' (and remove the files it no longer produces), then commit." >&2
  exit 1
fi
