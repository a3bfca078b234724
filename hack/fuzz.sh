#!/usr/bin/env bash
# Runs every native Go fuzz target of the module (func FuzzXxx in a _test.go
# file) for FUZZTIME each, one after another, and prints how many inputs
# each one executed. A target that fails leaves its input in the package's
# testdata/fuzz, which `go test` then runs as a seed; the script fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
FUZZTIME=${FUZZTIME:-30s}
# go minimizes every new interesting input for up to 60s by default, during
# which the run counts no executions; within a short run that would be most
# of it. Failing inputs are still minimized, for this long.
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-5s}

log=$(mktemp)
trap 'rm -f "$log"' EXIT

summary=()
status=0
while IFS=: read -r file decl; do
  name=${decl#func }
  name=${name%%(*}
  pkg=./$(dirname "$file")
  echo "== $pkg $name ($FUZZTIME)"
  if go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" 2>&1 | tee "$log"; then
    result=ok
  else
    result=FAILED
    status=1
  fi
  # go's last progress line: "fuzz: elapsed: 30s, execs: 12345 (411/sec), new interesting: ..."
  execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  summary+=("$(printf '%-32s %-28s %12s  %s' "$pkg" "$name" "${execs:-?}" "$result")")
done < <(grep -r --include='*_test.go' -E -o '^func Fuzz[A-Za-z0-9_]*\(' api cmd internal pkg test | sort)

echo
printf '%-32s %-28s %12s  %s\n' package target execs result
printf '%s\n' "${summary[@]}"
exit "$status"
