#!/usr/bin/env bash
# Tests of hack/lib.sh's cleanup trap: an interrupted run exits 130 (SIGINT) or
# 143 (SIGTERM) even when the command it interrupted succeeded, a failing run
# keeps its status, and cleanup runs in every case. Then of hack/together.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Background jobs of a shell without job control ignore SIGINT, and a shell
# cannot trap a signal it ignored from the start: give the runs job control.
set -m

# run.sh sources lib.sh, starts a stand-in for the operator that records
# being stopped, installs the trap, then does what its argument says.
cat >"$work/run.sh" <<SCRIPT
#!/usr/bin/env bash
set -euo pipefail
source "$ROOT/hack/lib.sh"
bash -c 'trap "touch $work/cleaned; kill \\\$! 2>/dev/null; exit 0" TERM; sleep 60 & touch $work/op-ready; wait' &
op_pid=\$!
until [[ -e $work/op-ready ]]; do sleep 0.05; done
install_cleanup
case \$1 in
# A set-up step that would succeed, still running when the signal comes:
# short sleeps, so that the trap runs as soon as the signal arrives.
setup) touch "$work/ready"; for _ in \$(seq 600); do sleep 0.1; done ;;
fail) touch "$work/ready"; exit 3 ;;
false) touch "$work/ready"; false ;;
pass) touch "$work/ready" ;;
esac
SCRIPT
chmod +x "$work/run.sh"

failures=0
check() { # check ARG SIGNAL WANT
  rm -f "$work/ready" "$work/cleaned" "$work/op-ready"
  # A run started from a background job inherits SIGINT ignored, and a shell
  # cannot trap a signal ignored at its start: give it the default back.
  env --default-signal=INT,TERM "$work/run.sh" "$1" &
  local pid=$! rc=0
  # The run installs its trap, then says it is ready. Wait for that as long
  # as a busy machine needs: a signal that came earlier tests nothing.
  for _ in $(seq 1200); do [[ -e $work/ready ]] && break; sleep 0.05; done
  [[ -e $work/ready ]] || { echo "FAIL: $1 never got ready" >&2; failures=$((failures + 1)); }
  if [[ $2 != - ]]; then kill "-$2" "$pid"; fi
  wait "$pid" || rc=$?
  kill -- "-$pid" 2>/dev/null || true # what the interrupted run left (its sleep)
  if [[ $rc -ne $3 ]]; then
    echo "FAIL: $1 with signal $2 exited $rc, want $3" >&2
    failures=$((failures + 1))
  elif [[ ! -e $work/cleaned ]]; then
    echo "FAIL: $1 with signal $2: cleanup did not run" >&2
    failures=$((failures + 1))
  else
    echo "ok: $1 with signal $2 exits $rc"
  fi
}
check setup INT 130
check setup TERM 143
check fail - 3
check false - 1
check pass - 0

# hack/together.sh: interrupted, it stops every command it runs (each gets
# SIGTERM and runs its own trap) and leaves no process behind; a command that
# fails makes it fail, after the others have finished, with every log shown.
marker="together-test-$$"
stopped() { echo "trap \"touch $work/stopped-$1; exit 0\" TERM; sleep 300 & touch $work/started-$1; wait"; }
rm -f "$work"/started-* "$work"/stopped-*
env --default-signal=INT,TERM "$ROOT/hack/together.sh" one "$(stopped one) # $marker" two "$(stopped two) # $marker" >"$work/together.out" 2>&1 &
pid=$!
for _ in $(seq 1200); do [[ -e $work/started-one && -e $work/started-two ]] && break; sleep 0.05; done
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
if [[ $rc -ne 143 || ! -e $work/stopped-one || ! -e $work/stopped-two ]]; then
  echo "FAIL: together.sh on SIGTERM exited $rc, stopped: $(ls "$work" | grep -c '^stopped-') of 2" >&2
  failures=$((failures + 1))
elif pgrep -f "$marker" >/dev/null; then
  echo "FAIL: together.sh left processes behind: $(pgrep -fa "$marker")" >&2
  pkill -f "$marker" || true
  failures=$((failures + 1))
else
  echo "ok: together.sh stops its commands on SIGTERM and exits 143"
fi
rc=0
"$ROOT/hack/together.sh" fails 'echo first; printf "=== RUN   TestP\n    p_test.go:3: a log line\n--- PASS: TestP (0.00s)\n=== RUN   TestA\n    a_test.go:7: wrong\n--- FAIL: TestA (0.00s)\n"; exit 3' \
  passes 'sleep 1; echo second; echo "--- FAIL: not in the digest"' >"$work/together.out" 2>&1 || rc=$?
# The digest of what failed comes last, before the FAILED line: the failed
# test with its message, not a passing test's, of the failed command only.
digest=$(sed -n '/^=== what failed in /,$p' "$work/together.out")
want_digest='=== what failed in fails (the whole log: tmp/together/fails.log):
fails:     a_test.go:7: wrong
fails: --- FAIL: TestA (0.00s)
FAILED: fails (exit status 3)'
if [[ $rc -ne 1 ]] || ! grep -q '^first$' "$work/together.out" || ! grep -q '^second$' "$work/together.out" ||
  ! grep -qx '=== fails: exit status 3, [0-9]* s' "$work/together.out" ||
  ! grep -qx '=== passes: exit status 0, [12] s' "$work/together.out" || grep -q 'together.sh:' "$work/together.out" ||
  [[ $digest != "$want_digest" ]]; then
  echo "FAIL: together.sh with a failing command exited $rc:" >&2
  sed 's/^/    /' "$work/together.out" >&2
  failures=$((failures + 1))
else
  echo "ok: together.sh fails when a command fails, shows every log, each command's status and time, and last what failed"
fi
# hack/steps.sh: every step runs, in turn, even after one failed; the run
# fails if any step did.
rc=0
"$ROOT/hack/steps.sh" "echo one >$work/steps.order" 'exit 4' "echo three >>$work/steps.order" >"$work/steps.out" 2>&1 || rc=$?
if [[ $rc -ne 1 || $(tr '\n' ' ' <"$work/steps.order") != "one three " ]] || ! grep -q 'exit status 4: exit 4' "$work/steps.out"; then
  echo "FAIL: steps.sh exited $rc, ran: $(tr '\n' ' ' <"$work/steps.order" 2>/dev/null)" >&2
  sed 's/^/    /' "$work/steps.out" >&2
  failures=$((failures + 1))
else
  echo "ok: steps.sh runs every step in turn and fails when one fails"
fi
[[ $failures -eq 0 ]] || exit 1
