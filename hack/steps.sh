#!/usr/bin/env bash
# Runs commands one after another, each with bash -c, every one of them even
# when one before it failed, and says how long each took. Fails if any failed.
# make test runs each of its lanes this way (hack/together.sh runs the lanes).
#
#   hack/steps.sh 'COMMAND' ['COMMAND']...
set -uo pipefail
rc=0
summary=()
for command in "$@"; do
  echo "=== step: $command"
  start=$SECONDS
  status=0
  bash -c "$command" || status=$?
  summary+=("$((SECONDS - start)) s, exit status $status: $command")
  [[ $status == 0 ]] || rc=1
done
echo "=== steps:"
printf '  %s\n' "${summary[@]}"
exit "$rc"
