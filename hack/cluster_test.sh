#!/usr/bin/env bash
# Test of hack/cluster.sh: a local cluster outlives a stalled kube-apiserver.
# kube-apiserver is stopped (SIGSTOP) for longer than a lease's renew
# deadline (10 s), as a busy machine or a restart can stall it, then goes on
# (SIGCONT): kube-controller-manager and kube-scheduler must still run (with
# leader election they exit; hack/kwokctl.yaml), and the cluster must still
# create a Deployment's pods. Then a component that exited is started again
# by the next hack/cluster.sh up. The cluster (kec-cluster-test) is removed
# on any exit.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source hack/lib.sh # running
NAME=kec-cluster-test
workdir=${KWOK_WORKDIR:-$HOME/.kwok}/clusters/$NAME
apiserver=""
cleanup() {
  # A stopped kube-apiserver would not stop on SIGTERM.
  [[ -z $apiserver ]] || kill -CONT "$apiserver" 2>/dev/null || true
  hack/cluster.sh down "$NAME" || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

hack/cluster.sh down "$NAME" # whatever an earlier run left
NODES=1 hack/cluster.sh up "$NAME" --kube-apiserver-port 0
export KUBECONFIG=$ROOT/tmp/$NAME/kubeconfig

pid() { cat "$workdir/pids/$1.pid"; }
controllers=("kube-controller-manager:$(pid kube-controller-manager)" "kube-scheduler:$(pid kube-scheduler)")
apiserver=$(pid kube-apiserver)
kill -STOP "$apiserver"
sleep 15
kill -CONT "$apiserver"
apiserver=""
# A component that gave up its lease exits within a retry period (2 s).
sleep 5

failures=0
for c in "${controllers[@]}"; do
  if running "${c#*:}"; then
    echo "ok: ${c%%:*} still runs after kube-apiserver stalled for 15 s"
  else
    echo "FAIL: ${c%%:*} exited when kube-apiserver stalled for 15 s (its log: $workdir/logs/${c%%:*}.log)" >&2
    failures=$((failures + 1))
  fi
done
bin/kubectl create deployment stalled --image=example.invalid/none >/dev/null
if bin/kubectl rollout status deployment/stalled --timeout=2m >/dev/null; then
  echo "ok: after the stall, a Deployment gets its pod, scheduled and running"
else
  echo "FAIL: after the stall, a Deployment does not get its pod:" >&2
  bin/kubectl get deployment,replicaset,pods -o wide >&2 || true
  failures=$((failures + 1))
fi

# A component that exited (kube-controller-manager gives up at start when
# kube-apiserver is slow to be healthy) is started again by the next up.
killed=$(pid kube-controller-manager)
kill -KILL "$killed"
while running "$killed"; do sleep 0.1; done
NODES=1 hack/cluster.sh up "$NAME" --kube-apiserver-port 0
if running "$(pid kube-controller-manager)" && [[ $(pid kube-controller-manager) != "$killed" ]] &&
  bin/kubectl create namespace after-restart >/dev/null &&
  bin/kubectl wait --for=create serviceaccount/default -n after-restart --timeout=2m >/dev/null; then
  echo "ok: up starts an exited kube-controller-manager again, and it works"
else
  echo "FAIL: up did not start the killed kube-controller-manager again, or it does not work (its log: $workdir/logs/kube-controller-manager.log)" >&2
  failures=$((failures + 1))
fi
[[ $failures == 0 ]] || exit 1
