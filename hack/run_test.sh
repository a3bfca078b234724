#!/usr/bin/env bash
# The test of `make run` (hack/run.sh): it runs as the README tells a
# newcomer, on a cluster of its own (kec-run-test), in the background with its
# output in tmp/kec-run-test/run.log. Once it prints what to look at, the
# README's commands run against it: the routing sample answers with a pod of
# web, the canary's 100 requests reach both tracks, TLS is terminated with the
# certificate run.sh made, and `kubectl envoy proxy-status -A` (bin/ on PATH,
# no operator address) shows the gateway's two Envoys SYNCED. The Gateway
# API sample is checked as run.sh's message tells: the Gateway public is
# Programmed (its proxies acknowledged) and its HTTPRoutes Accepted, and
# curl through its address, of its Service of type LoadBalancer (127.4.x.y:
# the load balancers' range of its pods' network), reaches a pod of web at / and the pod of web-canary at
# /canary, through the fleet's Envoy in its pod's own network namespace.
# Then Ctrl-C:
# SIGINT to run.sh's process group, as a terminal sends it; run.sh must exit
# 130, as it does on Ctrl-C by design, leaving no operator, host fleet or
# Envoy behind, the pods' network, the pods' own network namespaces and the
# webhook configurations removed.
# The cluster is removed at the end, on failure too.
#
# It needs root (the pods' network, hack/podnet.sh) and Envoy (bin/envoy, or
# ENVOY): without them it fails under CI (CI=true) and is skipped elsewhere,
# saying so. The gateway's listeners are the samples' host ports 8080, 8081
# and 8443: it fails, saying so, when something else serves them (a `make
# run` of kec-dev) or uses its pods' network, PODNET=3 (hack/podnet.sh; make
# run takes 0, the end-to-end suite 1, the conformance suite 2). LDFLAGS
# stamps the binaries it builds into bin/, as make build does (make passes
# it).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
NAME=${RUN_TEST_CLUSTER:-kec-run-test}
DIR=$ROOT/tmp/$NAME
ENVOY=${ENVOY:-$ROOT/bin/envoy}
export PODNET=${PODNET:-3}
read -r podnet_ns lb_range < <(hack/podnet.sh names | awk '$1 == "namespace" {ns = $2} $1 == "load-balancers" {lb = $2} END {print ns, lb}')
netns_up() { # read whole, then searched: see hack/podnet.sh
  local names
  names=$(ip netns list 2>/dev/null | awk '{print $1}') && grep -qxF "$podnet_ns" <<<"$names"
}
start=$SECONDS
step() { echo "[$((SECONDS - start))s] $*" >&2; }

missing=""
hack/podnet.sh check || missing="root and iproute2 for the pods' network (hack/podnet.sh)"
[[ -x $ENVOY ]] || missing="${missing:+$missing, and }Envoy at $ENVOY (make envoy)"
if [[ -n $missing ]]; then
  if [[ ${CI:-} == true ]]; then
    echo "FAIL: the test of make run needs $missing, which CI must have" >&2
    exit 1
  fi
  echo "SKIPPED: the test of make run needs $missing"
  exit 0
fi
# What run.sh would take over or share with something else on this host.
for port in 8080 8081 8443; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "FAIL: port $port is in use (a make run?): the gateway sample's proxies listen on it" >&2
    exit 1
  fi
done
if netns_up; then
  echo "FAIL: the pods' network $podnet_ns is up: another run uses it (PODNET=$PODNET hack/podnet.sh down removes a leftover)" >&2
  exit 1
fi

# The pods' own network namespaces already there (another run's): those
# this run makes are the others.
netns_before=$(ip netns list | awk '$1 ~ /^kec-pod-/ {print $1}' | sort)
netns_new() { comm -13 <(echo "$netns_before") <(ip netns list | awk '$1 ~ /^kec-pod-/ {print $1}' | sort); }

run_pid=""
run_pgid=""
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# cleanup stops run.sh as a terminal closing would (SIGTERM, which runs its
# own trap), then whatever of its process group is left, then removes the
# cluster and the pods' network, which the checks found absent at the start,
# and stops anything still running from the cluster's directory.
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n $run_pid ]] && kill -0 "$run_pid" 2>/dev/null; then
    kill -TERM "$run_pid" 2>/dev/null || true
    for _ in $(seq 60); do kill -0 "$run_pid" 2>/dev/null || break; sleep 0.5; done
    wait "$run_pid" 2>/dev/null || true
  fi
  # Whatever of its process group outlived it.
  [[ -z $run_pgid ]] || kill -KILL -- "-$run_pgid" 2>/dev/null || true
  if [[ $rc -ne 0 ]]; then
    for log in run.log proxies.log gateway-proxies.log; do
      if [[ -f $DIR/$log ]]; then
        echo "--- last lines of tmp/$NAME/$log:" >&2
        tail -n 40 "$DIR/$log" >&2 || true
      fi
    done
  fi
  hack/cluster.sh down "$NAME" || true
  # What escaped the process group: run from the cluster's directory or
  # pointed at it, this test's own.
  pkill -KILL -f "$DIR/" 2>/dev/null || true
  if netns_up; then
    hack/podnet.sh down || true
  fi
  for ns in $(netns_new); do
    ip link del "kecp${ns#kec-pod-}" 2>/dev/null || true
    ip netns del "$ns" || true
  done
  step "done"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

hack/cluster.sh down "$NAME" # whatever an earlier run left
rm -rf "$DIR/web-tls" "$DIR/proxies" "$DIR/gateway-proxies"
mkdir -p "$DIR"
# make run builds the operator and the plugin first (make build).
go build -ldflags "${LDFLAGS:-}" -o bin/kube-envoy-controller ./cmd/kube-envoy-controller
go build -ldflags "${LDFLAGS:-}" -o bin/kubectl-envoy ./cmd/kubectl-envoy
step "built bin/kube-envoy-controller and bin/kubectl-envoy"

# run.sh in a process group of its own, as a terminal's foreground job, with
# SIGINT not ignored (a background job inherits it ignored otherwise).
set -m
ENVOY=$ENVOY env --default-signal=INT,TERM hack/run.sh "$NAME" >"$DIR/run.log" 2>&1 &
run_pid=$!
run_pgid=$run_pid
set +m

# Until it says what to look at: as long as a busy machine needs.
for _ in $(seq 600); do
  grep -q "kube-envoy-controller is running against the local cluster \"$NAME\"" "$DIR/run.log" && break
  kill -0 "$run_pid" 2>/dev/null || break
  sleep 1
done
if ! grep -q "kube-envoy-controller is running against the local cluster \"$NAME\"" "$DIR/run.log"; then
  rc=0
  if kill -0 "$run_pid" 2>/dev/null; then
    echo "FAIL: hack/run.sh did not say what to look at within 10 minutes" >&2
  else
    wait "$run_pid" || rc=$?
    run_pid=""
    echo "FAIL: hack/run.sh exited $rc before it said what to look at" >&2
  fi
  exit 1
fi
step "run.sh says what to look at"

# eventually DESCRIPTION CHECK: runs the check (a shell function) until it
# passes, for up to two minutes; the proxies may still be starting.
eventually() {
  local what=$1 out=""
  shift
  for _ in $(seq 120); do
    if out=$("$@" 2>&1); then
      echo "ok: $what"
      return 0
    fi
    sleep 1
  done
  fail "$what: $out"
}

export KUBECONFIG=$DIR/kubeconfig
export PATH=$ROOT/bin:$PATH

routing() {
  local out
  out=$(curl -s http://127.0.0.1:8080/) || { echo "curl exited $?"; return 1; }
  echo "$out"
  [[ $out =~ ^web-[0-9a-z]+-[0-9a-z]+$ ]]
}
canary() {
  local out
  out=$(for i in $(seq 100); do curl -s -o /dev/null -w '%header{x-track}\n' http://127.0.0.1:8081/; done | sort | uniq -c)
  echo "$out"
  grep -Eq '^ *[0-9]+ canary$' <<<"$out" && grep -Eq '^ *[0-9]+ stable$' <<<"$out"
}
tls() {
  local out
  out=$(curl -s --cacert "tmp/$NAME/web-tls/tls.crt" --resolve web.example.com:8443:127.0.0.1 https://web.example.com:8443/) ||
    { echo "curl exited $?"; return 1; }
  echo "$out"
  [[ $out =~ ^web-[0-9a-z]+-[0-9a-z]+$ ]]
}
proxy_status() {
  local out
  out=$(kubectl envoy proxy-status -A) || { echo "$out"; return 1; }
  echo "$out"
  [[ $(grep -Ec '^web-gateway-\S+ +default/web-gateway +.* SYNCED ' <<<"$out") == 2 ]]
}
eventually "curl http://127.0.0.1:8080/ answers a pod of web" routing
eventually "the canary's 100 requests reach both tracks" canary
eventually "TLS on 8443 with tmp/$NAME/web-tls/tls.crt answers a pod of web" tls
eventually "kubectl envoy proxy-status -A shows web-gateway's two proxies SYNCED" proxy_status
step "the README's commands ran"

# The Gateway API sample, as run.sh's message tells it.
gateway_programmed() {
  local out
  out=$(kubectl get gateway public -o jsonpath='{.status.conditions[?(@.type=="Programmed")].status} {.status.conditions[?(@.type=="Programmed")].message}') ||
    { echo "$out"; return 1; }
  echo "$out"
  [[ $out == "True "* ]]
}
routes_accepted() {
  local route out
  for route in web web-canary; do
    out=$(kubectl get httproute "$route" -o jsonpath='{.status.parents[0].conditions[?(@.type=="Accepted")].status} {.status.parents[0].conditions[?(@.type=="ResolvedRefs")].status}') ||
      { echo "$route: $out"; return 1; }
    echo "$route: $out"
    [[ $out == "True True" ]] || return 1
  done
}
through_gateway() {
  local addr out i
  addr=$(kubectl get gateway public -o jsonpath='{.status.addresses[0].value}') || { echo "$addr"; return 1; }
  [[ $addr == "${lb_range%.0.0/16}".* ]] || { echo "the Gateway's address is '$addr', not one of $lb_range"; return 1; }
  # Every request to / reaches a pod of web (never web-canary), and every
  # request to /canary the pod of web-canary.
  for i in $(seq 5); do
    out=$(curl -s "http://$addr/") || { echo "curl http://$addr/ exited $?"; return 1; }
    [[ $out =~ ^web-[0-9a-z]+-[0-9a-z]+$ ]] || { echo "http://$addr/ answered '$out'"; return 1; }
    out=$(curl -s "http://$addr/canary") || { echo "curl http://$addr/canary exited $?"; return 1; }
    [[ $out =~ ^web-canary-[0-9a-z]+-[0-9a-z]+$ ]] || { echo "http://$addr/canary answered '$out'"; return 1; }
  done
  echo "http://$addr/ answers a pod of web, http://$addr/canary $out"
}
eventually "the Gateway public is Programmed" gateway_programmed
eventually "its HTTPRoutes web and web-canary are Accepted, their backends resolved" routes_accepted
eventually "curl through the Gateway's address reaches web at / and web-canary at /canary" through_gateway
step "the Gateway API sample checked"

# Ctrl-C. What run.sh started: its process group (the operator, the host
# fleet, whose Envoys are its children).
started=$(pgrep -g "$run_pid" | grep -vx "$run_pid" | tr '\n' ' ' || true)
envoys=$(sed -n 's/^Envoy for pod .* (pid \([0-9]*\)).*/\1/p' "$DIR/proxies.log" | tr '\n' ' ')
[[ -n $envoys ]] || fail "tmp/$NAME/proxies.log names no Envoy"
gateway_envoys=$(sed -n 's/^Envoy for pod .* (pid \([0-9]*\)).*/\1/p' "$DIR/gateway-proxies.log" 2>/dev/null | tr '\n' ' ')
[[ -n $gateway_envoys ]] || fail "tmp/$NAME/gateway-proxies.log names no Envoy"
envoys+=" $gateway_envoys"
pgrep -g "$run_pid" -f bin/kube-envoy-controller >/dev/null || fail "no operator runs in run.sh's process group"
[[ $(pgrep -g "$run_pid" -f "$DIR/hostfleet" | wc -l) -eq 2 ]] || fail "not two host fleets (the samples', the Gateway's) in run.sh's process group"
kill -INT -- "-$run_pid"
rc=0
for _ in $(seq 120); do kill -0 "$run_pid" 2>/dev/null || break; sleep 0.5; done
if kill -0 "$run_pid" 2>/dev/null; then
  fail "hack/run.sh still runs 60s after Ctrl-C"
else
  wait "$run_pid" || rc=$?
  run_pid=""
  # run.sh exits 130 on Ctrl-C (its INT trap), after stopping what it started.
  [[ $rc -eq 130 ]] && echo "ok: run.sh exits 130 on Ctrl-C" || fail "run.sh exited $rc on Ctrl-C, want 130"
fi
started=$(printf '%s\n' $started $envoys | sort -un | tr '\n' ' ')
# By name too: anything run from or pointed at the cluster's directory.
left=""
for pid in $(printf '%s\n' $started $(pgrep -f "$DIR/" || true) | sort -un); do
  kill -0 "$pid" 2>/dev/null && left+=$'\n'"  $(ps -o pid=,args= -p "$pid" | cut -c1-160)"
done
if [[ -n $left ]]; then
  fail "processes left after Ctrl-C:$left"
else
  echo "ok: Ctrl-C stops the operator, the host fleet and its Envoys (pids ${started% })"
fi
if netns_up; then
  fail "the pods' network $podnet_ns is still up after Ctrl-C"
else
  echo "ok: Ctrl-C removes the pods' network"
fi
left=$(netns_new | tr '\n' ' ')
if [[ -n $left ]]; then
  fail "the pods' own network namespaces are still there after Ctrl-C: $left"
else
  echo "ok: Ctrl-C removes the Gateway's pods' own network namespaces"
fi
if bin/kubectl get mutatingwebhookconfiguration kube-envoy-controller-injector >/dev/null 2>&1 ||
  bin/kubectl get validatingwebhookconfiguration kube-envoy-controller-validator >/dev/null 2>&1; then
  fail "the webhook configurations are still there after Ctrl-C"
else
  echo "ok: Ctrl-C removes the webhook configurations"
fi
grep -q "The cluster $NAME is still up" "$DIR/run.log" || fail "run.sh did not say the cluster stays up"
step "Ctrl-C checked"
[[ $failures -eq 0 ]] || exit 1
