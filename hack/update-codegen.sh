#!/usr/bin/env bash
# Writes the typed Go clients of the APIs in api/ into pkg/generated with
# k8s.io/code-generator's kube_codegen.sh: the clientset, the apply
# configurations, and the listers and informers. The generator is pinned by its
# own module, hack/codegen, so that changing it leaves hack/tools (and the
# binaries built from it) alone; it must be the release of the k8s.io/*
# modules in go.mod. The generators are installed into tmp/codegen/bin.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
module=$(go list -m)

want=$(go list -m -f '{{.Version}}' k8s.io/client-go)
have=$(cd hack/codegen && go list -m -f '{{.Version}}' k8s.io/code-generator)
if [[ $want != "$have" ]]; then
  echo "hack/codegen pins k8s.io/code-generator $have but go.mod has k8s.io/client-go $want;" >&2
  echo "run: (cd hack/codegen && go get -tool k8s.io/code-generator/cmd/{client,lister,informer,applyconfiguration}-gen@$want && go mod tidy)" >&2
  exit 1
fi
codegen_root=$(cd hack/codegen && go mod download k8s.io/code-generator && go list -m -f '{{.Dir}}' k8s.io/code-generator)

export GOBIN="$root/tmp/codegen/bin"
# shellcheck source=/dev/null
source "$codegen_root/kube_codegen.sh"

# Types from k8s.io/api that ours embed, with client-go's apply configurations
# for them, so that ours nest client-go's rather than the plain structs.
externals=(
  k8s.io/api/core/v1.Container:k8s.io/client-go/applyconfigurations/core/v1
  k8s.io/api/core/v1.LocalObjectReference:k8s.io/client-go/applyconfigurations/core/v1
  k8s.io/api/core/v1.PodTemplateSpec:k8s.io/client-go/applyconfigurations/core/v1
  k8s.io/api/core/v1.ResourceRequirements:k8s.io/client-go/applyconfigurations/core/v1
  k8s.io/api/core/v1.Volume:k8s.io/client-go/applyconfigurations/core/v1
)

kube::codegen::gen_client \
  --with-watch \
  --with-applyconfig \
  --applyconfig-externals "$(IFS=,; echo "${externals[*]}")" \
  --output-dir "$root/pkg/generated" \
  --output-pkg "$module/pkg/generated" \
  --boilerplate "$root/hack/boilerplate.go.txt" \
  "$root/api"
