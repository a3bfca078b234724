#!/usr/bin/env bash
# The Gateway API's official conformance suite (sigs.k8s.io/gateway-api,
# pinned in go.mod) against this operator and real Envoys: a fresh local
# cluster kec-gwc (hack/cluster.sh), the CRDs, the operator binary running
# against it, then `go test -tags conformance ./test/conformance`, which
# runs the rig's load balancers, the fleets' Envoys and the suite's echo
# backends, each pod in a network namespace of its own (as root), and then
# the suite. Everything it starts is stopped again when it exits, on
# failure too.
#
# CONFORMANCE_REPORT=FILE writes the suite's report there; arguments are
# passed to go test (for example -run 'TestConformance/HTTPRouteSimpleSameNamespace').
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
envoy_inotify # real Envoys run on this host

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# The pods' network of its own (hack/podnet.sh): its cluster's pods take
# 10.2.0.0/16, its load balancers 127.3.0.0/16, apart from the other
# suites'. Its load balancers listen on 8080 of their addresses, where the
# end-to-end suite's Envoys and make run's listen on every address: make
# test does not run those beside it.
export PODNET=${PODNET:-2}
NAME=${CONFORMANCE_CLUSTER:-kec-gwc}
DIR=$ROOT/tmp/$NAME
op_pid=""
podnet_up=""

hack/podnet.sh check || { echo "conformance: the pods' network needs root and iproute2" >&2; exit 1; }
install_cleanup

hack/cluster.sh down "$NAME" # whatever an earlier run left
mkdir -p "$DIR"
rm -f "$DIR/operator.log"
hack/cluster.sh up "$NAME" --kube-apiserver-port 0
export KUBECONFIG=$DIR/kubeconfig
hack/podnet.sh pods-down # an earlier run's pods, whose addresses this cluster's pods may take
hack/podnet.sh up
podnet_up=1

bin/kubectl apply --server-side -f config/crd/bases -f config/crd/gateway-api >/dev/null
for _ in $(seq 30); do
  bin/kubectl wait --for condition=Established --timeout 60s crd --all >/dev/null 2>&1 && break
  sleep 1
done
bin/kubectl wait --for condition=Established --timeout 60s crd --all >/dev/null

go build -o "$DIR/kube-envoy-controller" ./cmd/kube-envoy-controller
ports=$(free_ports 3)
{ read -r xds_port; read -r health_port; read -r webhook_port; } <<<"$ports"
# The webhooks, served by the operator on this host: the fleets the Gateways
# get are admitted as any Envoy is.
hack/webhook-local.sh "$webhook_port"
# The fleets' Envoys run in their pods' network namespaces: the xDS server
# listens where they reach the host.
"$DIR/kube-envoy-controller" --kubeconfig "$KUBECONFIG" --envoy-path "${ENVOY:-$ROOT/bin/envoy}" \
  --metrics-bind-address 0 --health-probe-bind-address "127.0.0.1:$health_port" \
  --xds-bind-address "0.0.0.0:$xds_port" --debug-bind-address 0 \
  --webhook-bind-address "127.0.0.1:$webhook_port" --webhook-cert-dns-name localhost \
  --webhook-cert-write-files --webhook-cert-dir "$DIR/webhook-certs" \
  >"$DIR/operator.log" 2>&1 &
op_pid=$!
wait_ready "$op_pid" "$health_port" "$DIR/operator.log"
wait_webhooks

rc=0
CONFORMANCE_ROOT=$ROOT CONFORMANCE_XDS_ADDR=127.0.0.1:$xds_port CONFORMANCE_DIR=$DIR \
  go test -vet=off -tags conformance -count=1 -v -timeout 40m ./test/conformance "$@" || rc=$?
stop_operator || rc=1
echo "checking the operator's log (tmp/$NAME/operator.log)"
go run ./hack/logcheck "$DIR/operator.log" || rc=1
exit "$rc"
