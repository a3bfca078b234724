#!/usr/bin/env bash
# Runs commands at once, each in a process group of its own with its output
# in tmp/together/NAME.log, and prints each log whole, in the order given,
# once every command has ended, then each one's status and time, then what
# failed (a digest of each failed command's log). Fails if any command fails. Interrupted, or on
# any exit, it sends SIGTERM to every group still running (each script stops
# what it started with its own trap), then SIGKILL to what is left.
#
#   hack/together.sh NAME 'COMMAND' [NAME 'COMMAND']...
#
# make test runs the install test and the benchmarks' smoke run this way:
# each on its own cluster, both mostly waiting on their clusters.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
logs=$ROOT/tmp/together
mkdir -p "$logs"

names=()
pids=()
starts=()
stop_all() {
  local rc=$? pid
  # A second signal must not cut this short: the commands' own cleanup (their
  # clusters) runs while this waits.
  trap '' INT TERM
  for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  for _ in $(seq 120); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 -- "-$pid" 2>/dev/null && alive=1; done
    [[ $alive == 1 ]] || break
    sleep 0.5
  done
  for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
  if [[ $rc -ne 0 && ${#pids[@]} -gt 0 ]]; then
    local name
    for name in "${names[@]}"; do
      echo "=== $name (interrupted; log: tmp/together/$name.log)"
      tail -n 40 "$logs/$name.log"
    done
  fi
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

while [[ $# -gt 0 ]]; do
  name=$1 command=${2:?usage: hack/together.sh NAME COMMAND [NAME COMMAND]...}
  shift 2
  echo "$name: $command (log: tmp/together/$name.log)"
  # setsid without forking: the command's pid is its group's id.
  setsid -w bash -c "$command" >"$logs/$name.log" 2>&1 </dev/null &
  names+=("$name")
  pids+=($!)
  starts+=("$SECONDS")
done

# digest LOG: a log's failures, in at most 20 lines: its failed steps
# (hack/steps.sh), then each failed test (--- FAIL) with its messages
# (file_test.go:N:, and panics), those go test printed before it (-v) or
# after it, and the lines that say FAIL.
digest() {
  {
    grep -E -- '^ +[0-9]+ s, exit status [1-9]' "$1"
    awk '
      /^=== (RUN|CONT|PAUSE|NAME)|--- (PASS|SKIP)/ { held = ""; kept = 0; after = 0; next }
      /--- FAIL/ { printf "%s%s\n", held, $0; held = ""; kept = 0; after = 1; next }
      /_test\.go:[0-9]+:|^panic:/ {
        if (after) print
        else if (kept < 4) { held = held $0 "\n"; kept++ }
        next
      }
      /^FAIL\t|(^|[[:space:]])FAIL:/ { print }
    ' "$1"
  } | cut -c1-300 | awk '!seen[$0]++' | head -n 20 || true
}

rc=0
declare -A status_of took_of
# wait -n -p: each command's status and time as it ends, whatever the order.
# Only those still running are waited for: bash forgets one once reaped.
running=("${pids[@]}")
while [[ ${#running[@]} -gt 0 ]]; do
  status=0 ended=""
  wait -n -p ended "${running[@]}" || status=$?
  [[ -n $ended ]] || { echo "together.sh: wait returned no command (status $status)" >&2; exit 1; }
  status_of[$ended]=$status
  took_of[$ended]=$SECONDS
  [[ $status == 0 ]] || rc=1
  left=()
  for pid in "${running[@]}"; do [[ $pid == "$ended" ]] || left+=("$pid"); done
  running=("${left[@]}")
done
statuses=()
took=()
for i in "${!pids[@]}"; do
  statuses+=("${status_of[${pids[$i]}]}")
  took+=("$((took_of[${pids[$i]}] - starts[i]))")
done
pids=() # all ended: nothing to stop
for i in "${!names[@]}"; do
  echo "=== ${names[$i]} (exit status ${statuses[$i]})"
  cat "$logs/${names[$i]}.log"
done
for i in "${!names[@]}"; do
  echo "=== ${names[$i]}: exit status ${statuses[$i]}, ${took[$i]} s"
done
# Last, what failed, in a few lines a reader of the output's tail sees
# first: each failed command's failed steps (hack/steps.sh), failed tests and
# their first messages, and the lines that say FAIL or panic.
for i in "${!names[@]}"; do
  [[ ${statuses[$i]} == 0 ]] && continue
  echo "=== what failed in ${names[$i]} (the whole log: tmp/together/${names[$i]}.log):"
  digest "$logs/${names[$i]}.log" | sed "s/^/${names[$i]}: /"
done
for i in "${!names[@]}"; do
  [[ ${statuses[$i]} == 0 ]] || echo "FAILED: ${names[$i]} (exit status ${statuses[$i]})" >&2
done
exit "$rc"
