#!/usr/bin/env bash
# Benchmarks: a fresh local cluster kec-bench without client QPS limits and
# with an audit log of the write requests in every namespace but the
# cluster's own, the operator binary running against it, then
# `go test -tags bench ./test/bench/... -run X -v`. Everything it starts is
# stopped again when it exits, on failure too. The run fails too when the
# operator's log shows a panic, a data race or an error in a hot loop.
#
#   hack/bench.sh [go test args...]      e.g. hack/bench.sh -run PodSet
#
# BENCH_CLUSTER names the cluster (default kec-bench); NODES the number of KWOK
# nodes (default 50, 110 pods each). BENCH_CRDS lists the CRD files or
# directories to install (default config/crd/bases) and BENCH_CONTROLLERS the
# operator's --controllers (default *), to run a benchmark with only the
# controllers it measures. Results: tmp/$BENCH_CLUSTER/results/.
#
# BENCH_OPERATOR_ARGS adds flags to the operator's command line, such as
# --concurrent-reconciles=20, and BENCH_OPERATOR_ENV variables to its
# environment, such as GOMEMLIMIT=1380MiB, to measure another setting.
#
# BENCH_XDS_PLAINTEXT=1 runs the operator with --xds-plaintext, and the xDS
# benchmark's clients without TLS: the figures beside those over mutual TLS.
# Each of its clients has a connection of its own, as each Envoy does;
# BENCH_XDS_STREAMS_PER_CONN=K puts K streams on each connection, and
# BENCH_XDS_SETUPS=K lets at most K of its proxies set up at once.
#
# Contour (TestXDSAgainstContour, docs/benchmarks.md): with BENCH_CONTOUR=1,
# or when the -run pattern names Contour (hack/bench.sh -run Contour), the
# script builds bin/contour at the release hack/contour.sh pins (once; go
# install, several minutes), installs Contour's CRDs and runs `contour serve`
# on this host beside the operator, its xDS on 127.0.0.1 over mutual TLS with
# certificates of its own (hack/tlscert -mutual), and stops it on exit.
# BENCH_CONTOUR=0 never starts it. A run without it skips that benchmark.
# A smoke run never builds Contour: it starts it when bin/contour is already
# that release, and otherwise skips the benchmark.
#
# BENCH_SMOKE=1 (make bench-smoke) runs every benchmark at tiny sizes on a
# cluster of 3 nodes (default name kec-bench-smoke): it checks the harness and
# the benchmarks' own assertions, and records no figures. The sizes are
# BENCH_ENVOY_SIZES, BENCH_FOO_SIZES, BENCH_XDS_SIZES, BENCH_XDS_ROUNDS,
# BENCH_PODSET_REPLICAS, BENCH_WEBHOOK_PODS, BENCH_WEBHOOK_QUIET_PODS,
# BENCH_SETTLE, BENCH_NOISY_* and BENCH_FLOOD_* (test/bench); set, they win
# over the smoke defaults.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
envoy_inotify # real Envoys run on this host

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
smoke=${BENCH_SMOKE:-0}
if [[ $smoke == 1 ]]; then
  NAME=${BENCH_CLUSTER:-kec-bench-smoke}
  nodes=${NODES:-3}
  export BENCH_ENVOY_SIZES=${BENCH_ENVOY_SIZES:-3} BENCH_FOO_SIZES=${BENCH_FOO_SIZES:-3} BENCH_XDS_SIZES=${BENCH_XDS_SIZES:-5} \
    BENCH_XDS_ROUNDS=${BENCH_XDS_ROUNDS:-2} BENCH_PODSET_REPLICAS=${BENCH_PODSET_REPLICAS:-20} \
    BENCH_WEBHOOK_PODS=${BENCH_WEBHOOK_PODS:-10} BENCH_WEBHOOK_QUIET_PODS=${BENCH_WEBHOOK_QUIET_PODS:-5} BENCH_SETTLE=${BENCH_SETTLE:-2s}
  # Fleet A in two EnvoyConfigs, small enough that a real Envoy loads each
  # at admission within its timeout while the Go tests share the cores.
  export BENCH_NOISY_CLUSTERS=${BENCH_NOISY_CLUSTERS:-100} BENCH_NOISY_CHUNK=${BENCH_NOISY_CHUNK:-64} \
    BENCH_NOISY_PROXIES=${BENCH_NOISY_PROXIES:-2} BENCH_NOISY_B_PROXIES=${BENCH_NOISY_B_PROXIES:-3}
  export BENCH_FLOOD_STREAMS=${BENCH_FLOOD_STREAMS:-1} BENCH_FLOOD_REQUESTS=${BENCH_FLOOD_REQUESTS:-2} \
    BENCH_FLOOD_NAMES=${BENCH_FLOOD_NAMES:-12000} BENCH_FLOOD_B_PROXIES=${BENCH_FLOOD_B_PROXIES:-3}
else
  NAME=${BENCH_CLUSTER:-kec-bench}
  nodes=${NODES:-50}
fi
DIR=$ROOT/tmp/$NAME
op_pid=""
contour_pid=""

install_cleanup

args=("$@")
[[ ${#args[@]} -gt 0 ]] || args=(-run .)

# Contour runs when asked for, or when the tests to run name it.
run_pattern=""
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
  -run | --run | -test.run) run_pattern=${args[i + 1]:-} ;;
  -run=* | --run=* | -test.run=*) run_pattern=${args[i]#*=} ;;
  esac
done
contour=${BENCH_CONTOUR:-}
if [[ -z $contour ]]; then
  contour=0
  if [[ $run_pattern == *Contour* || ($smoke == 1 && $run_pattern == .) ]]; then
    contour=1
  fi
fi
if [[ $contour == 1 && $smoke == 1 ]] && ! hack/contour.sh check; then
  echo "smoke run: bin/contour is not the pinned Contour and a smoke run builds none (make contour): the Contour benchmark is skipped" >&2
  contour=0
fi
unset CONTOUR_PID CONTOUR_XDS_ADDR CONTOUR_METRICS_ADDR CONTOUR_DEBUG_ADDR CONTOUR_CERT_DIR # set below when Contour runs
if [[ $contour == 1 ]]; then
  hack/contour.sh build
fi

hack/cluster.sh down "$NAME" # whatever an earlier run left
rm -f "$DIR/operator.log" # so that a failure before the operator starts shows none
# 50 nodes of 110 pods hold every benchmark's pods at once; a /16 Service
# range holds the Envoy benchmark's Services (the default /24 holds 254).
# The API server rotates its audit log at 100 MB unless told otherwise, and
# `kwokctl logs audit` reads the current file only: a rotation in the middle
# of a run would drop writes from its counts. An Envoy row at N=1000 logs
# more than 100 MB.
NODES=$nodes hack/cluster.sh up "$NAME" --kube-apiserver-port 0 --disable-qps-limits \
  --kube-audit-policy "$ROOT/test/bench/audit-policy.yaml" \
  --extra-args kube-apiserver=service-cluster-ip-range=10.96.0.0/16 \
  --extra-args kube-apiserver=audit-log-maxsize=1000000
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

if [[ $contour == 1 ]]; then
  # Contour's CRDs, from its module at the pinned release. It runs with its
  # defaults but for where it listens and what this host lacks: no leader
  # election (one replica), its xDS on the loopback interface over mutual
  # TLS, its metrics, health and debug endpoints on free loopback ports.
  # Contour's gRPC server has no per-source limits to raise: the load
  # clients' connections, all from 127.0.0.1, reach it unbounded.
  bin/kubectl apply --server-side -f "$(hack/contour.sh crds)" >/dev/null
  bin/kubectl wait --for condition=Established --timeout 60s crd/httpproxies.projectcontour.io >/dev/null
  rm -rf "$DIR/contour-certs"
  # Envoys bootstrapped by Contour check that its certificate is for "contour".
  go run ./hack/tlscert -mutual "$DIR/contour-certs" contour localhost
  cports=$(free_ports 3)
  { read -r contour_xds_port; read -r contour_metrics_port; read -r contour_debug_port; } <<<"$cports"
  certs=$DIR/contour-certs/server
  bin/contour serve --kubeconfig "$KUBECONFIG" --disable-leader-election \
    --xds-address 127.0.0.1 --xds-port "$contour_xds_port" \
    --contour-cafile "$certs/ca.crt" --contour-cert-file "$certs/tls.crt" --contour-key-file "$certs/tls.key" \
    --http-address 127.0.0.1 --http-port "$contour_metrics_port" --health-address 127.0.0.1 --health-port "$contour_metrics_port" \
    --debug-http-address 127.0.0.1 --debug-http-port "$contour_debug_port" \
    >"$DIR/contour.log" 2>&1 &
  contour_pid=$!
  wait_contour "$contour_pid" "$contour_metrics_port" "$contour_xds_port" "$DIR/contour.log"
  # What the benchmark reads of Contour; without CONTOUR_XDS_ADDR it skips.
  export CONTOUR_PID=$contour_pid CONTOUR_XDS_ADDR=127.0.0.1:$contour_xds_port \
    CONTOUR_METRICS_ADDR=127.0.0.1:$contour_metrics_port CONTOUR_DEBUG_ADDR=127.0.0.1:$contour_debug_port \
    CONTOUR_CERT_DIR=$DIR/contour-certs/client
fi

go build -o "$DIR/kube-envoy-controller" ./cmd/kube-envoy-controller
ports=$(free_ports 6)
{ read -r webhook_port; read -r health_port; read -r xds_port; read -r metrics_port; read -r pprof_port; read -r debug_port; } <<<"$ports"
# The sidecar-injection webhook, served by the operator on this host.
hack/webhook-local.sh "$webhook_port"
# Metrics in plain HTTP, on the loopback interface only: the benchmark reads them.
plaintext=()
[[ ${BENCH_XDS_PLAINTEXT:-0} == 0 ]] || plaintext=(--xds-plaintext)
# Every load client connects from 127.0.0.1: one source, where each Envoy of a
# cluster has an address of its own. The per-source limits would bound the
# benchmark, not the server.
sources=(--xds-max-connections-per-source 1000000 --xds-max-handshakes-per-source 1000000)
env ${BENCH_OPERATOR_ENV:-} "$DIR/kube-envoy-controller" --kubeconfig "$KUBECONFIG" --controllers "${BENCH_CONTROLLERS:-*}" "${plaintext[@]}" "${sources[@]}" \
  --envoy-path "${ENVOY:-$ROOT/bin/envoy}" \
  --metrics-secure=false --metrics-bind-address "127.0.0.1:$metrics_port" --health-probe-bind-address "127.0.0.1:$health_port" \
  --pprof-bind-address "127.0.0.1:$pprof_port" --xds-bind-address "127.0.0.1:$xds_port" --debug-bind-address "127.0.0.1:$debug_port" \
  --webhook-bind-address "127.0.0.1:$webhook_port" --webhook-cert-dns-name localhost \
  --webhook-cert-write-files --webhook-cert-dir "$DIR/webhook-certs" ${BENCH_OPERATOR_ARGS:-} \
  >"$DIR/operator.log" 2>&1 &
op_pid=$!
wait_ready "$op_pid" "$health_port" "$DIR/operator.log"

out=""
if [[ $smoke != 1 ]]; then
  mkdir -p "$DIR/results"
  out=$DIR/results
fi
rc=0
BENCH_ROOT=$ROOT BENCH_CLUSTER=$NAME BENCH_OUT=$out BENCH_SMOKE=$smoke OPERATOR_PID=$op_pid \
  OPERATOR_XDS_ADDR=127.0.0.1:$xds_port OPERATOR_METRICS_ADDR=127.0.0.1:$metrics_port \
  OPERATOR_PPROF_ADDR=127.0.0.1:$pprof_port \
  go test -vet=off -tags bench -count=1 -timeout 60m ./test/bench/... -v "${args[@]}" || rc=$?
stop_operator || rc=1
stop_contour || rc=1
echo "checking the operator's log (tmp/$NAME/operator.log)"
go run ./hack/logcheck "$DIR/operator.log" || rc=1
exit "$rc"
