#!/usr/bin/env bash
# End-to-end tests: a fresh local cluster (hack/cluster.sh), the CRDs, the
# operator binary, built with the race detector, running against it, then
# `go test -tags e2e ./test/e2e/...`. The run fails too when the operator does
# not stop gracefully at the end, or when its log shows a panic, a data race
# or an error repeated in a hot loop (hack/logcheck). Everything it starts is
# stopped again when it exits, on failure too.
# Arguments are passed to go test (for example -run Foo). E2E_RACE=0 builds
# the operator without the race detector.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
NAME=${E2E_CLUSTER:-kec-e2e}
DIR=$ROOT/tmp/$NAME
op_pid=""

install_cleanup

hack/cluster.sh down "$NAME" # whatever an earlier run left
rm -f "$DIR/operator.log" # so that a failure before the operator starts shows none
hack/cluster.sh up "$NAME" --kube-apiserver-port 0
export KUBECONFIG=$DIR/kubeconfig

bin/kubectl apply --server-side -f config/crd/bases >/dev/null
# A CRD that has no status yet makes kubectl wait fail at once: ask again.
for _ in $(seq 30); do
  bin/kubectl wait --for condition=Established --timeout 60s crd --all >/dev/null 2>&1 && break
  sleep 1
done
bin/kubectl wait --for condition=Established --timeout 60s crd --all >/dev/null

race=(-race)
[[ ${E2E_RACE:-1} != 0 ]] || race=()
go build "${race[@]}" -o "$DIR/kube-envoy-controller" ./cmd/kube-envoy-controller
ports=$(free_ports 3)
{ read -r webhook_port; read -r xds_port; read -r health_port; } <<<"$ports"
# The sidecar-injection webhook, served by the operator on this host.
hack/webhook-local.sh "$webhook_port"
XDS_ADDR=127.0.0.1:$xds_port
"$DIR/kube-envoy-controller" --kubeconfig "$KUBECONFIG" \
  --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address "127.0.0.1:$health_port" \
  --xds-bind-address "$XDS_ADDR" \
  --webhook-bind-address "127.0.0.1:$webhook_port" --webhook-cert-dns-name localhost \
  --webhook-cert-write-files --webhook-cert-dir "$DIR/webhook-certs" \
  >"$DIR/operator.log" 2>&1 &
op_pid=$!
wait_ready "$op_pid" "$health_port" "$DIR/operator.log"

rc=0
E2E_ROOT=$ROOT E2E_XDS_ADDR=$XDS_ADDR go test -tags e2e -count=1 -timeout 20m ./test/e2e/... "$@" || rc=$?
# The operator's own account of the run, whatever the tests said: it stops
# gracefully, and its log has no panic, data race or hot loop.
stop_operator || rc=1
echo "checking the operator's log (tmp/$NAME/operator.log)"
go run ./hack/logcheck "$DIR/operator.log" || rc=1
exit "$rc"
