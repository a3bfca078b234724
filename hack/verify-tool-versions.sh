#!/usr/bin/env bash
# Fails when a module that both the tools (hack/tools: the kube binaries,
# kwok, controller-gen, helm, etcd) and the operator's module compile is
# resolved to a different version in each.
#
# Both build with the same settings (CGO_ENABLED=0, -trimpath), and share
# thousands of packages: client-go, apimachinery, gRPC, protobuf,
# golang.org/x/... Go's build cache compiles such a package once for both
# only when it and every package it imports are the same version in both
# modules: golang.org/x/sys one patch apart compiles all of client-go twice,
# minutes of a cold build on 2 cores. To fix it, raise the lower side to the
# higher one: `go get MODULE@VERSION` in that module, then `go mod tidy`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tags=${TEST_TAGS:-e2e,bench,install,chaos,conformance}
format='{{with .Module}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}'
# The packages each side compiles, as "module version", once per module.
ours=$(go list -deps -test -tags "$tags" -f "$format" ./... | awk 'NF == 2' | sort -u)
tools=$(cd hack/tools && go list -deps -f "$format" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl \
  sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl \
  sigs.k8s.io/controller-tools/cmd/controller-gen helm.sh/helm/v3/cmd/helm ./etcd |
  awk 'NF == 2' | sort -u)
apart=$(join <(echo "$ours") <(echo "$tools") | awk '$2 != $3 {printf "  %s: %s in go.mod, %s in hack/tools/go.mod\n", $1, $2, $3}')
if [[ -n $apart ]]; then
  echo "Modules both the operator and the tools compile, at different versions (each compiles their packages, and all that import them, once more):" >&2
  echo "$apart" >&2
  echo "Raise the lower side to the higher version: go get MODULE@VERSION in that module (hack/tools for the tools), then go mod tidy." >&2
  exit 1
fi
