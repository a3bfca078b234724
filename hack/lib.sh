# Shell functions shared by the scripts in hack/. Source it.

# wait_ready PID PORT LOG: waits until the operator with pid PID answers
# /readyz on 127.0.0.1:PORT. Fails, showing the end of LOG, if the operator
# exits first or is not ready within 60 seconds.
wait_ready() {
  local pid=$1 port=$2 log=$3
  for _ in $(seq 120); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "the operator exited at start:" >&2
      tail -n 20 "$log" >&2
      return 1
    fi
    if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.5
  done
  echo "the operator is not ready after 60s:" >&2
  tail -n 20 "$log" >&2
  return 1
}

# cleanup stops what a test or benchmark run started: the operator ($op_pid),
# then the cluster $NAME, showing the end of the operator's log ($DIR) if the
# run failed. Install it with: trap cleanup EXIT INT TERM
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n ${op_pid:-} ]]; then
    kill "$op_pid" 2>/dev/null || true
    wait "$op_pid" 2>/dev/null || true
  fi
  if [[ $rc -ne 0 && -f $DIR/operator.log ]]; then
    echo "--- last lines of the operator's log (tmp/$NAME/operator.log):" >&2
    tail -n 40 "$DIR/operator.log" >&2 || true
  fi
  hack/cluster.sh down "$NAME" || true
  exit "$rc"
}
