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

# wait_webhooks: waits until the API server calls the operator's webhooks
# with the certificate it serves: a server-side dry run of an EnvoyConfig,
# which the validating webhook judges, passes. The operator is ready once it
# has put its CA into the webhook configurations; the API server uses the
# CA once its informer has the change, which on a busy machine can take
# seconds. Fails, with the last refusal, after 60 seconds.
wait_webhooks() {
  local probe='{"apiVersion":"example.com/v1","kind":"EnvoyConfig","metadata":{"name":"webhook-probe","namespace":"default"},"spec":{"envoyRef":"webhook-probe"}}'
  local out=""
  for _ in $(seq 120); do
    out=$(bin/kubectl create --dry-run=server -o name -f - <<<"$probe" 2>&1) && return 0
    sleep 0.5
  done
  echo "the API server does not call the operator's webhooks after 60s: $out" >&2
  return 1
}

# free_ports N: prints N distinct local ports, one a line, that were free when
# asked (hack/freeport binds each one to make sure).
free_ports() {
  go run ./hack/freeport "${1:-1}"
}

# stop_process NAME PID SECONDS [any]: stops the process PID, which the
# messages call NAME, with SIGTERM, and fails if it does not stop within
# SECONDS or, unless "any" is given, exits with an error.
stop_process() {
  local name=$1 pid=$2 seconds=$3 any=${4:-} rc=0
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq $((seconds * 2))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "$name did not stop within ${seconds}s of SIGTERM" >&2
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    return 1
  fi
  wait "$pid" 2>/dev/null || rc=$?
  if [[ $rc -ne 0 && $any == any ]]; then
    return 0
  fi
  if [[ $rc -ne 0 ]]; then
    echo "$name exited with status $rc on SIGTERM" >&2
  fi
  return "$rc"
}

# stop_operator: stops the operator ($op_pid) gracefully, as a rolling update
# would, and fails if it does not stop within 60 seconds or exits with an
# error (a race-enabled build exits 66 after it reported a data race).
stop_operator() {
  [[ -n ${op_pid:-} ]] || return 0
  local pid=$op_pid
  op_pid=""
  stop_process "the operator" "$pid" 60
}

# wait_contour PID PORT XDS_PORT LOG: waits until Contour with pid PID
# answers /healthz on 127.0.0.1:PORT and accepts connections on its xDS port,
# which it opens once it has built its first configuration. Fails, showing
# the end of LOG, if Contour exits first or is not ready within 60 seconds.
wait_contour() {
  local pid=$1 port=$2 xds=$3 log=$4
  for _ in $(seq 120); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "Contour exited at start:" >&2
      tail -n 20 "$log" >&2
      return 1
    fi
    if curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && (: <"/dev/tcp/127.0.0.1/$xds") 2>/dev/null; then
      return 0
    fi
    sleep 0.5
  done
  echo "Contour is not ready after 60s:" >&2
  tail -n 20 "$log" >&2
  return 1
}

# stop_contour: stops Contour ($contour_pid), and fails if it does not stop
# within 30 seconds of SIGTERM. Its exit status is not judged: the benchmark
# measures Contour, it does not test it.
stop_contour() {
  [[ -n ${contour_pid:-} ]] || return 0
  local pid=$contour_pid
  contour_pid=""
  stop_process Contour "$pid" 30 any
}

# cleanup stops what a test or benchmark run started: a background job
# ($bg_pid), the operator ($op_pid), an operator a test started itself (its
# pid in the file $op_pidfile), Contour ($contour_pid), then the cluster
# $NAME (if set), showing the end of the operator's log ($DIR) if the run
# failed. It keeps the run's exit status. Install it with install_cleanup.
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n ${bg_pid:-} ]]; then
    kill "$bg_pid" 2>/dev/null || true
    wait "$bg_pid" 2>/dev/null || true
  fi
  if [[ -n ${op_pid:-} ]]; then
    kill "$op_pid" 2>/dev/null || true
    wait "$op_pid" 2>/dev/null || true
  fi
  if [[ -n ${contour_pid:-} ]]; then
    kill "$contour_pid" 2>/dev/null || true
    wait "$contour_pid" 2>/dev/null || true
  fi
  if [[ -n ${op_pidfile:-} && -s $op_pidfile ]]; then
    kill -KILL "$(cat "$op_pidfile")" 2>/dev/null || true
    rm -f "$op_pidfile"
  fi
  if [[ $rc -ne 0 && -n ${DIR:-} && -f $DIR/operator.log ]]; then
    echo "--- last lines of the operator's log (tmp/$NAME/operator.log):" >&2
    tail -n 40 "$DIR/operator.log" >&2 || true
  fi
  if [[ -n ${NAME:-} ]]; then
    hack/cluster.sh down "$NAME" || true
  fi
  if [[ -n ${podnet_up:-} ]]; then
    hack/podnet.sh down || true
  fi
  exit "$rc"
}

# install_cleanup runs cleanup when the script exits. An interrupted run exits
# 130 (SIGINT) or 143 (SIGTERM), whatever the command it interrupted returned:
# a trap's $? is the status of the last command, which is often 0 during
# set-up, and an interrupted run must never look like a passing one.
install_cleanup() {
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# envoy_inotify lets many real Envoys run on this host: each watches its
# certificates' directory with inotify, and Linux allows a user 128 inotify
# instances by default, which fifty Envoys and the rest of the machine
# exhaust (Envoy then fails an assertion and exits). As root it raises the
# limit, which stays raised until the machine restarts; otherwise it says so.
envoy_inotify() {
  local want=2048 have
  have=$(cat /proc/sys/fs/inotify/max_user_instances 2>/dev/null || echo "$want")
  if ((have < want)); then
    if [[ $(id -u) == 0 ]]; then
      sysctl -qw "fs.inotify.max_user_instances=$want" || true
    else
      echo "fs.inotify.max_user_instances is $have: many Envoys on this host may fail to start (each watches its certificates)" >&2
    fi
  fi
}

# running PID: the process PID exists and is no zombie not reaped yet
# (kill -0, and kwokctl, take a zombie for a running process).
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) } # the state follows the command's closing parenthesis
  [[ ${stat:0:1} != Z ]]
}
