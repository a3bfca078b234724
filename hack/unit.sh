#!/usr/bin/env bash
# Unit and envtest integration tests: `go test -count=1 -race ./...`, in a
# process group of its own. A test binary that dies (a panic in a reconcile
# ends the suite, on purpose) leaves the etcd and kube-apiserver that envtest
# started behind; they are stopped with the group when this script exits, on
# failure or interruption too. Arguments are passed to go test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Without job control, a background job is not a process group leader, so
# setsid makes it one without forking: its pid is the group's id.
# -p 4: most packages are envtest suites that spend their time waiting on
# their API server; twice as many as there are cores keeps both busy.
setsid -w go test -count=1 -race -p 4 ./... "$@" &
group=$!
trap 'kill -KILL -- -"$group" 2>/dev/null || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
wait "$group"
