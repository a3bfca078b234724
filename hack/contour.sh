#!/usr/bin/env bash
# Contour, the control plane the xDS benchmark compares the operator with
# (hack/bench.sh -run Contour), at the release pinned here and nowhere else.
# It is not a tool of the tools module: make tools, make test and the cold
# CI loop never build it.
#
#   hack/contour.sh build   put Contour in bin/contour (go install from the
#                           module proxy), unless it is already this release
#   hack/contour.sh check   succeed when bin/contour is this release
#   hack/contour.sh crds    print the file of Contour's CRDs in the module
#                           cache (go mod download)
set -euo pipefail

CONTOUR_VERSION=v1.33.8
CONTOUR_MODULE=github.com/projectcontour/contour

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# pinned: whether bin/contour is this release (the binary records its
# module's version: go version -m).
pinned() {
  [[ -x bin/contour ]] && go version -m bin/contour 2>/dev/null |
    grep -qE "^[[:space:]]+mod[[:space:]]+$CONTOUR_MODULE[[:space:]]+$CONTOUR_VERSION([[:space:]]|$)"
}

case ${1:-} in
check)
  pinned
  ;;
build)
  if pinned; then
    exit 0
  fi
  echo "building Contour $CONTOUR_VERSION into bin/contour (go install; several minutes on 2 cores)" >&2
  # Outside this module: Contour's own go.mod decides its dependencies.
  (cd / && GOBIN=$ROOT/bin CGO_ENABLED=0 GOFLAGS=-trimpath go install "$CONTOUR_MODULE/cmd/contour@$CONTOUR_VERSION")
  ;;
crds)
  dir=$(cd / && go mod download -json "$CONTOUR_MODULE@$CONTOUR_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  f=$dir/examples/contour/01-crds.yaml
  if [[ ! -f $f ]]; then
    echo "no $f in Contour's module" >&2
    exit 1
  fi
  echo "$f"
  ;;
*)
  echo "usage: hack/contour.sh build|check|crds" >&2
  exit 2
  ;;
esac
