#!/usr/bin/env bash
# Unit and envtest integration tests: `go test -count=1 -shuffle=on ./...`,
# in a process group of its own. A test binary that dies (a panic in a reconcile ends the
# suite, on purpose) leaves the etcd and kube-apiserver that envtest started
# behind; they are stopped with the group when this script exits, on failure
# or interruption too. Arguments are passed to go test.
#
# Every package runs with the race detector but those that run no concurrent
# code of ours: the API's schema and admission as clients see them
# (test/integration, internal/testing/crdschema: the API server's own validation) and
# the fuzz targets' seed corpora of pure functions (test/fuzz). Under -race
# they cost minutes of CPU on 2 cores for nothing the detector could find.
#
# -vet=off: make verify vets every package, with every build tag, once.
#
# -shuffle=on: each package's tests run in a random order, so that a test
# that passes only when another has run before it cannot pass unnoticed.
# go test prints the seed ("-test.shuffle N"); -shuffle=N repeats the order.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

module=$(go list -m)
plain=("$module/test/integration" "$module/internal/testing/crdschema" "$module/test/fuzz")
# The packages whose tests take longest, first: go test starts packages in
# the order given, and these would otherwise start last and run alone at the
# end.
first=("$module/internal/controller/envoyconfig" "$module/internal/controller/envoy" "$module/internal/xds/server"
  "$module/internal/controller/podset" "$module/internal/controller")
mapfile -t raced < <(printf '%s\n' "${first[@]}"; go list ./... | grep -vxF -f <(printf '%s\n' "${plain[@]}" "${first[@]}"))

# GOGC=400: the test binaries and the API servers and etcds they start
# collect garbage a quarter as often. One envtest package (internal/status,
# its test binary with the race detector and its API server and etcd) took
# 5.5 s of CPU on average of four runs, against 6.6 s of three at GOGC=100;
# make test's memory stays far below the machine's (9.2 GB at most, of 23;
# 6.3 GB at GOGC=100).
export GOGC=${GOGC:-400}

# Without job control, a background job is not a process group leader, so
# setsid makes it one without forking: its pid is the group's id.
# -p 6 for the race run: most packages are envtest suites that spend their
# time waiting on their API server, and with the longest first it keeps 2
# cores busy to the end (alone: 293 s, where -p 4 in the listed order took
# 361 s and -p 6 in that order 324 s).
RACED="${raced[*]}" PLAIN="${plain[*]}" setsid -w bash -c \
  'rc=0; CGO_ENABLED=1 go test -vet=off -count=1 -shuffle=on -race -p 6 $RACED "$@" || rc=1; go test -vet=off -count=1 -shuffle=on -p 4 $PLAIN "$@" || rc=1; exit $rc' unit "$@" &
group=$!
# envtest starts etcd and kube-apiserver in process groups of their own
# (Setpgid), so a test binary killed by its -timeout leaves them out of the
# group; they stay in the session setsid made, whose id is the group's.
trap 'pkill -KILL -s "$group" 2>/dev/null || true; kill -KILL -- -"$group" 2>/dev/null || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
wait "$group"
