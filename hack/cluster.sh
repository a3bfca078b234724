#!/usr/bin/env bash
# Local Kubernetes clusters from the project's own binaries, with kwokctl's
# binary runtime: etcd, kube-apiserver, kube-controller-manager, kube-scheduler
# and kwok from bin/ (`make tools`), and KWOK nodes that run no containers but
# take pods through their life cycle. hack/kwokctl.yaml configures them.
#
#   hack/cluster.sh up NAME [kwokctl create flags...]   start NAME, or reuse it if it is healthy
#   hack/cluster.sh down NAME                           remove NAME and stop its processes (its components' logs stay in tmp/NAME/cluster-logs)
#   hack/cluster.sh kubeconfig NAME                     print the path of NAME's kubeconfig
#
# NODES sets the number of KWOK nodes (default 3). PODNET=N (default 0) gives
# their pods addresses of 10.N.0.0/16, the range of the pods' network N
# (hack/podnet.sh), one /24 per node. Logs go to tmp/NAME/.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/hack/lib.sh"
BIN=$ROOT/bin
cmd=${1:?usage: hack/cluster.sh up|down|kubeconfig NAME}
name=${2:?usage: hack/cluster.sh up|down|kubeconfig NAME}
shift 2
dir=$ROOT/tmp/$name
kubeconfig=$dir/kubeconfig
mkdir -p "$dir"

kwokctl() { "$BIN/kwokctl" "$@" >>"$dir/kwokctl.log" 2>&1; }

# kwokctl picks each component's port by scanning down from 32767 for one
# that is free at that moment, so two clusters created at once (make test
# creates two) can pick the same. One creation or start at a time, across
# every checkout: the lock is held until kwokctl returns, when the cluster
# serves on its ports. -o: kwokctl's components do not inherit the lock.
locked_kwokctl() {
  flock -o "${TMPDIR:-/tmp}/kube-envoy-controller-kwokctl.lock" "$BIN/kwokctl" "$@" >>"$dir/kwokctl.log" 2>&1
}

# The list is read whole before it is searched: with pipefail, grep -q
# ending the pipe at the first match made kwokctl die of SIGPIPE while it
# printed the next cluster, and a cluster listed first among several
# seemed not to exist (down left it running).
exists() {
  local clusters
  clusters=$("$BIN/kwokctl" get clusters 2>/dev/null) && grep -qx "$name" <<<"$clusters"
}

healthy() {
  "$BIN/kwokctl" --name "$name" get kubeconfig >"$kubeconfig" 2>/dev/null &&
    "$BIN/kubectl" --kubeconfig "$kubeconfig" get --raw /readyz >/dev/null 2>&1
}

fail() {
  echo "cluster $name: $1 (kwokctl log: tmp/$name/kwokctl.log)" >&2
  tail -n 20 "$dir/kwokctl.log" >&2 || true
  exit 1
}

workdir=${KWOK_WORKDIR:-$HOME/.kwok}/clusters/$name # kwokctl's: pids/, logs/

# gone: the cluster's components whose process has exited (running).
gone() {
  local pidfile out=()
  for pidfile in "$workdir/pids"/*.pid; do
    [[ -f $pidfile ]] || continue
    running "$(cat "$pidfile")" || out+=("$(basename "$pidfile" .pid)")
  done
  echo "${out[*]}"
}

case $cmd in
up)
  if exists; then
    if ! healthy; then
      # The processes are gone (a reboot, say): start them again, or start afresh.
      locked_kwokctl start cluster --name "$name" --wait 2m || true
      if ! healthy; then
        kwokctl delete cluster --name "$name" || true
      fi
    fi
  fi
  if ! exists; then
    # hack/kwokctl.yaml: no leader election in a cluster of one of each.
    locked_kwokctl --config "$ROOT/hack/kwokctl.yaml" create cluster --name "$name" --runtime binary \
      --etcd-binary "$BIN/etcd" \
      --kube-apiserver-binary "$BIN/kube-apiserver" \
      --kube-controller-manager-binary "$BIN/kube-controller-manager" \
      --kube-scheduler-binary "$BIN/kube-scheduler" \
      --kwok-controller-binary "$BIN/kwok" \
      --kubeconfig "" \
      --wait 2m "$@" || fail "create failed"
  fi
  healthy || fail "not ready"
  # kwokctl waits for kube-apiserver alone, and starts nothing again. On a
  # busy machine kube-controller-manager gives up waiting for kube-apiserver
  # to be healthy and exits, and the cluster's Deployments and namespaces
  # then get no pods and no ServiceAccount: a component that exited is
  # started again, until kube-controller-manager works (the default
  # namespace has its ServiceAccount).
  starts=0 ready=""
  for _ in $(seq 240); do
    exited=$(gone)
    if [[ -z $exited ]] && "$BIN/kubectl" --kubeconfig "$kubeconfig" get serviceaccount default -n default >/dev/null 2>&1; then
      ready=1
      break
    fi
    if [[ -n $exited ]]; then
      [[ $starts -lt 3 ]] || fail "$exited exited again (logs: $workdir/logs)"
      echo "cluster $name: $exited exited; starting it again" >&2
      # kwokctl starts a component whose pid file is gone; it takes a
      # zombie's for a running process.
      for component in $exited; do rm -f "$workdir/pids/$component.pid"; done
      locked_kwokctl start cluster --name "$name" --wait 2m || true
      starts=$((starts + 1))
    fi
    sleep 0.5
  done
  [[ -n $ready ]] || fail "kube-controller-manager made no ServiceAccount in 2 minutes (logs: $workdir/logs)"
  podnet=${PODNET:-0}
  kwokctl --name "$name" scale node --replicas "${NODES:-3}" \
    --param ".podCIDRs = [\"10.$podnet.0.0/24\", \"fd00::/64\"]" || fail "scaling nodes failed"
  echo "cluster $name is ready; KUBECONFIG=$kubeconfig" >&2
  ;;
down)
  if exists; then
    # The components' logs outlive the cluster, in tmp/NAME/cluster-logs,
    # for whoever reads a failure; the audit log, which the suites read
    # while the cluster runs, stays behind: at a benchmark's sizes it is
    # hundreds of MB.
    rm -rf "$dir/cluster-logs"
    mkdir -p "$dir/cluster-logs"
    for log in "$workdir/logs"/*.log; do
      [[ ! -f $log || $(basename "$log") == audit.log ]] || cp "$log" "$dir/cluster-logs/"
    done
    kwokctl delete cluster --name "$name" || fail "delete failed"
  fi
  rm -f "$kubeconfig"
  ;;
kubeconfig)
  echo "$kubeconfig"
  ;;
*)
  echo "usage: hack/cluster.sh up|down|kubeconfig NAME" >&2
  exit 2
  ;;
esac
