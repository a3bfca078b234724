#!/usr/bin/env bash
# End-to-end tests: a fresh local cluster (hack/cluster.sh), the CRDs, the
# operator binary, built with the race detector, running against it, then
# `go test -tags e2e ./test/e2e/...`. The run fails too when the operator does
# not stop gracefully at the end, or when its log shows a panic, a data race
# or an error repeated in a hot loop (hack/logcheck). Everything it starts is
# stopped again when it exits, on failure too.
#
# Then, in the same cluster, the chaos suite (test/chaos) for CHAOS_DURATION
# (default 60s): it runs the same operator binary itself, to SIGKILL and
# start it again, and counts its writes in the API server's audit log
# (test/chaos/audit-policy.yaml). Its operator's log is checked as well.
#
# Arguments are passed to the end-to-end go test (for example -run Foo).
# E2E_RACE=0 builds the operator without the race detector; E2E_CHAOS=0 skips
# the chaos suite; E2E_TESTS=0 skips the end-to-end tests (make chaos).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
envoy_inotify # real Envoys run on this host

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# The pods' network of its own (hack/podnet.sh): its cluster's pods take
# 10.1.0.0/16, apart from the other suites'.
export PODNET=${PODNET:-1}
NAME=${E2E_CLUSTER:-kec-e2e}
DIR=$ROOT/tmp/$NAME
op_pid=""
bg_pid=""
op_pidfile=$DIR/chaos-operator.pid
podnet_up=""
tests=${E2E_TESTS:-1}
chaos=${E2E_CHAOS:-1}

install_cleanup

hack/cluster.sh down "$NAME" # whatever an earlier run left
rm -f "$DIR/operator.log" "$DIR/chaos-operator.log" # so that a failure before the operator starts shows none
# PortForward: KWOK forwards a pod's port where a test says (kubectl envoy's port forwarding).
hack/cluster.sh up "$NAME" --kube-apiserver-port 0 --kube-audit-policy "$ROOT/test/chaos/audit-policy.yaml" --enable-crds=PortForward
export KUBECONFIG=$DIR/kubeconfig

# The pods' network, for the tests with real Envoys (test/e2e/realenvoy_test.go):
# the pods' addresses answer from a network namespace. It needs root; without
# it those tests fail under CI and are skipped elsewhere, saying so.
if [[ $tests != 0 ]] && hack/podnet.sh check; then
  hack/podnet.sh pods-down # an earlier run's pods, whose addresses this cluster's pods may take
  hack/podnet.sh up
  podnet_up=1
fi

bin/kubectl apply --server-side -f config/crd/bases -f config/crd/gateway-api >/dev/null
# A CRD that has no status yet makes kubectl wait fail at once: ask again.
for _ in $(seq 30); do
  bin/kubectl wait --for condition=Established --timeout 60s crd --all >/dev/null 2>&1 && break
  sleep 1
done
bin/kubectl wait --for condition=Established --timeout 60s crd --all >/dev/null

race=() race_env=()
[[ ${E2E_RACE:-1} == 0 ]] || { race=(-race); race_env=(CGO_ENABLED=1); } # the race detector needs cgo
env "${race_env[@]}" go build "${race[@]}" -o "$DIR/kube-envoy-controller" ./cmd/kube-envoy-controller
ports=$(free_ports 4)
{ read -r webhook_port; read -r xds_port; read -r health_port; read -r debug_port; } <<<"$ports"
# The sidecar-injection webhook, served by the operator on this host.
hack/webhook-local.sh "$webhook_port"
XDS_ADDR=127.0.0.1:$xds_port
op_args=(--kubeconfig "$KUBECONFIG" --envoy-path "${ENVOY:-$ROOT/bin/envoy}"
  --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address "127.0.0.1:$health_port"
  --xds-bind-address "$XDS_ADDR" --debug-bind-address "127.0.0.1:$debug_port"
  --webhook-bind-address "127.0.0.1:$webhook_port" --webhook-cert-dns-name localhost
  --webhook-cert-write-files --webhook-cert-dir "$DIR/webhook-certs")
# What the chaos suite needs to run the operator itself.
export CHAOS_ROOT=$ROOT CHAOS_CLUSTER=$NAME OPERATOR_BIN=$DIR/kube-envoy-controller \
  OPERATOR_ARGS=$(printf '%s\n' "${op_args[@]}") OPERATOR_LOG=$DIR/chaos-operator.log \
  OPERATOR_HEALTH_ADDR=127.0.0.1:$health_port OPERATOR_PIDFILE=$op_pidfile \
  CHAOS_WRITES_FILE=$DIR/chaos-writes.txt

rc=0
if [[ $chaos != 0 ]]; then
  # The chaos suite's test binary, built while the end-to-end tests run.
  go test -vet=off -tags chaos -c -o "$DIR/chaos.test" ./test/chaos >"$DIR/chaos-build.log" 2>&1 &
  bg_pid=$!
fi
if [[ $tests != 0 ]]; then
  "$DIR/kube-envoy-controller" "${op_args[@]}" >"$DIR/operator.log" 2>&1 &
  op_pid=$!
  wait_ready "$op_pid" "$health_port" "$DIR/operator.log"
  # The tests write EnvoyConfigs at once, through the validating webhook.
  wait_webhooks
  # The tests run at once (t.Parallel), each in namespaces of its own: they
  # mostly wait on the cluster.
  E2E_ROOT=$ROOT E2E_XDS_ADDR=$XDS_ADDR E2E_DEBUG_ADDR=127.0.0.1:$debug_port go test -vet=off -tags e2e -count=1 -parallel 6 -timeout 20m ./test/e2e/... "$@" || rc=$?
  # The operator's own account of the run, whatever the tests said: it stops
  # gracefully, and its log has no panic, data race or hot loop.
  stop_operator || rc=1
  echo "checking the operator's log (tmp/$NAME/operator.log)"
  go run ./hack/logcheck "$DIR/operator.log" || rc=1
fi

if [[ $chaos != 0 ]]; then
  echo "chaos for ${CHAOS_DURATION:-60s} (test/chaos; the operator's log: tmp/$NAME/chaos-operator.log)"
  built=0
  wait "$bg_pid" && built=1
  bg_pid=""
  if [[ $built == 1 ]]; then
    if ! "$DIR/chaos.test" -test.v -test.count=1 -test.timeout 30m; then
      rc=1
      # hack/cluster.sh down keeps the components' logs.
      echo "the cluster's logs: tmp/$NAME/cluster-logs; its writes: tmp/$NAME/chaos-writes.txt" >&2
    fi
  else
    cat "$DIR/chaos-build.log" >&2
    rc=1
  fi
  echo "checking the operator's log (tmp/$NAME/chaos-operator.log)"
  go run ./hack/logcheck "$DIR/chaos-operator.log" || rc=1
fi
exit "$rc"
