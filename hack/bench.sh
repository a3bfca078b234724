#!/usr/bin/env bash
# Benchmarks: a fresh local cluster kec-bench without client QPS limits and
# with an audit log of the write requests in the benchmark's namespaces, the
# operator binary running against it, then
# `go test -tags bench ./test/bench/... -run X -v`. Everything it starts is
# stopped again when it exits, on failure too.
#
#   hack/bench.sh [go test args...]      e.g. hack/bench.sh -run PodSet
#
# BENCH_CLUSTER names the cluster (default kec-bench); NODES the number of KWOK
# nodes (default 50, 110 pods each). BENCH_CRDS lists the CRD files or
# directories to install (default config/crd/bases) and BENCH_CONTROLLERS the
# operator's --controllers (default *), to run a benchmark with only the
# controllers it measures. Results: tmp/$BENCH_CLUSTER/results/.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
NAME=${BENCH_CLUSTER:-kec-bench}
DIR=$ROOT/tmp/$NAME
op_pid=""

trap cleanup EXIT INT TERM

args=("$@")
[[ ${#args[@]} -gt 0 ]] || args=(-run .)

hack/cluster.sh down "$NAME" # whatever an earlier run left
# 50 nodes of 110 pods hold every benchmark's pods at once; a /16 Service
# range holds the Envoy benchmark's 2200 Services (the default /24 holds 254).
NODES=${NODES:-50} hack/cluster.sh up "$NAME" --kube-apiserver-port 0 --disable-qps-limits \
  --kube-audit-policy "$ROOT/test/bench/audit-policy.yaml" \
  --extra-args kube-apiserver=service-cluster-ip-range=10.96.0.0/16
export KUBECONFIG=$DIR/kubeconfig

crds=()
for f in ${BENCH_CRDS:-config/crd/bases}; do crds+=(-f "$f"); done
bin/kubectl apply --server-side "${crds[@]}" >/dev/null
# A CRD that has no status yet makes kubectl wait fail at once: ask again.
for _ in $(seq 30); do
  bin/kubectl wait --for condition=Established --timeout 60s crd --all >/dev/null 2>&1 && break
  sleep 1
done
bin/kubectl wait --for condition=Established --timeout 60s crd --all >/dev/null

go build -o bin/kube-envoy-controller ./cmd/kube-envoy-controller
# The sidecar-injection webhook, served by the operator on this host.
webhook_port=$(hack/webhook-local.sh free-port)
health_port=$(hack/webhook-local.sh free-port)
xds_addr=127.0.0.1:$(hack/webhook-local.sh free-port)
hack/webhook-local.sh "$webhook_port"
bin/kube-envoy-controller --kubeconfig "$KUBECONFIG" --controllers "${BENCH_CONTROLLERS:-*}" \
  --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address "127.0.0.1:$health_port" \
  --xds-bind-address "$xds_addr" \
  --webhook-bind-address "127.0.0.1:$webhook_port" --webhook-cert-dns-name localhost \
  --webhook-cert-write-files --webhook-cert-dir "$DIR/webhook-certs" \
  >"$DIR/operator.log" 2>&1 &
op_pid=$!
wait_ready "$op_pid" "$health_port" "$DIR/operator.log"

mkdir -p "$DIR/results"
BENCH_ROOT=$ROOT BENCH_CLUSTER=$NAME BENCH_OUT=$DIR/results OPERATOR_PID=$op_pid OPERATOR_XDS_ADDR=$xds_addr \
  go test -tags bench -count=1 -timeout 60m ./test/bench/... -v "${args[@]}"
