#!/usr/bin/env bash
# `make run`: the local cluster, the CRDs, the samples and the operator in the
# foreground. Ctrl-C stops the operator; the cluster stays up for kubectl
# (`make cluster-down` removes it).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
NAME=${1:-kec-dev}
hack/cluster.sh up "$NAME"
export KUBECONFIG=$ROOT/tmp/$NAME/kubeconfig

bin/kubectl apply --server-side -f config/crd/bases >/dev/null
bin/kubectl wait --for condition=Established --timeout 60s crd --all >/dev/null
echo "CRDs installed: $(bin/kubectl get crd -o name | sed 's#.*/##' | tr '\n' ' ')"

# The sidecar-injection webhook, served by the operator on this host.
WEBHOOK_PORT=${WEBHOOK_PORT:-9443}
hack/webhook-local.sh "$WEBHOOK_PORT"

bin/kube-envoy-controller --kubeconfig "$KUBECONFIG" --zap-devel=false \
  --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" --webhook-cert-dns-name localhost \
  --webhook-cert-write-files --webhook-cert-dir "$ROOT/tmp/$NAME/webhook-certs" &
op_pid=$!
trap 'kill "$op_pid" 2>/dev/null; wait "$op_pid" 2>/dev/null; echo; echo "Operator stopped. The cluster $NAME is still up; make cluster-down removes it."' EXIT
trap 'exit 130' INT TERM

bin/kubectl apply -f config/samples/ >/dev/null
echo "Samples applied: $(ls config/samples | tr '\n' ' ')"

# Tell the user what to look at once the sample Foo has its pods.
bin/kubectl wait --for=jsonpath='{.status.availableReplicas}'=1 --timeout 120s foo/example-foo >/dev/null || true
cat <<MSG

================================================================================
kube-envoy-controller is running against the local cluster "$NAME".

  export KUBECONFIG=$KUBECONFIG      # or: bin/kwokctl --name $NAME get kubeconfig
  bin/kubectl get foos                       # example-foo: Available 1
  bin/kubectl get deployment,pods -l controller=example-foo
  bin/kubectl describe foo example-foo       # conditions and events
  bin/kubectl scale foo/example-foo --replicas=3

Ctrl-C stops the operator. make cluster-down removes the cluster.
================================================================================

MSG
bin/kubectl get foos
wait "$op_pid"
