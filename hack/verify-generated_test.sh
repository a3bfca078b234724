#!/usr/bin/env bash
# Tests of hack/verify-generated.sh on throwaway copies of the tree: it passes
# on the committed tree, fails on a stale generated file, on a generated file
# that belongs to no type any more and on a missing one, and never changes the
# tree it checks.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# fresh makes a copy of the tree at $work/tree.
fresh() {
  rm -rf "$work/tree"
  mkdir -p "$work/tree"
  tar -C "$ROOT" --exclude=./bin --exclude=./tmp --exclude=./.git -cf - . | tar -C "$work/tree" -xf -
  ln -s "$ROOT/bin" "$work/tree/bin"
}

# fingerprint prints a checksum of every file of the copy.
fingerprint() {
  (cd "$work/tree" && find . -path ./bin -prune -o -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum)
}

failures=0
# expect WANT(pass|fail) [WHAT MESSAGE]...: runs the script on the copy; it
# must pass or fail as wanted, say each MESSAGE (when failing) and leave the
# copy as it was. Each WHAT is reported on its own.
expect() {
  local want=$1 rc=0 before after
  shift
  before=$(fingerprint)
  "$work/tree/hack/verify-generated.sh" >"$work/out" 2>&1 || rc=$?
  after=$(fingerprint)
  local common=""
  if [[ $want == pass && $rc -ne 0 ]]; then common="failed (status $rc)"; fi
  if [[ $want == fail && $rc -eq 0 ]]; then common="passed"; fi
  if [[ $before != "$after" ]]; then common="${common:+$common; }changed the tree"; fi
  while [[ $# -gt 0 ]]; do
    local what=$1 message=${2:-} problem=$common
    shift 2 || shift
    if [[ $want == fail && -n $message ]] && ! grep -qF -- "$message" "$work/out"; then
      problem="${problem:+$problem; }did not say: $message"
    fi
    if [[ -n $problem ]]; then
      echo "FAIL: $what: $problem" >&2
      sed 's/^/    /' "$work/out" >&2
      failures=$((failures + 1))
    else
      echo "ok: $what"
    fi
  done
}

fresh
expect pass "the committed tree"

# Four defects in one copy, so that one run of the script (which reports
# every stale file) must name all four:
# - a field added to an API type without regenerating: its deepcopy code and
#   CRD are stale;
# - the CRD of a type that no longer exists;
# - a generated file that was never committed;
# - a template of the Helm chart edited by hand;
# - a flag's usage string changed, and a condition reason added, without
#   regenerating the reference pages;
# - the generated field reference removed.
fresh
sed -i 's/^type PodSetSpec struct {$/&\n\tExtra string `json:"extra,omitempty"`/' "$work/tree/api/demo/v1alpha1/podset_types.go"
grep -q 'Extra string' "$work/tree/api/demo/v1alpha1/podset_types.go" || { echo "the test's edit of podset_types.go did not apply" >&2; exit 1; }
sed 's/foobars/ghosts/g; s/FooBar/Ghost/g; s/foobar/ghost/g' "$work/tree/config/crd/bases/k8s.io_foobars.yaml" \
  >"$work/tree/config/crd/bases/k8s.io_ghosts.yaml"
rm "$work/tree/api/watch/v1alpha1/zz_generated.deepcopy.go"
sed -i 's/minAvailable: 1/minAvailable: 2/' "$work/tree/charts/kube-envoy-controller/templates/poddisruptionbudget.yaml"
grep -q 'minAvailable: 2' "$work/tree/charts/kube-envoy-controller/templates/poddisruptionbudget.yaml" || { echo "the test's edit of the chart did not apply" >&2; exit 1; }
sed -i 's/"Print the version (git describe at build time) and exit."/"Print the version."/' "$work/tree/internal/cmdline/cmdline.go"
grep -q '"Print the version."' "$work/tree/internal/cmdline/cmdline.go" || { echo "the test's edit of the flags did not apply" >&2; exit 1; }
printf '\n// FooBarReasonExtra (Degraded True): a reason of the test.\nconst FooBarReasonExtra = "Extra"\n' >>"$work/tree/api/k8s/v1/conditions.go"
rm "$work/tree/docs/reference/api-fields.md"
expect fail "a type changed without regenerating" "differs from what generation produces: config/crd/bases/demo.k8s.io_podsets.yaml" \
  "the CRD of a deleted type" "not produced by generation any more: config/crd/bases/k8s.io_ghosts.yaml" \
  "a missing deepcopy file" "missing: api/watch/v1alpha1/zz_generated.deepcopy.go" \
  "a chart template edited by hand" "differs from what generation produces: charts/kube-envoy-controller/templates/poddisruptionbudget.yaml" \
  "a flag's usage string changed" "differs from what generation produces: docs/reference/flags.md" \
  "a condition reason added" "differs from what generation produces: docs/reference/conditions.md" \
  "the field reference removed" "missing: docs/reference/api-fields.md"

# The prose of a page with generated sections is its own: edited, it is no
# stale generated file.
fresh
sed -i 's/^See also:$/See also, for example:/' "$work/tree/docs/reference/flags.md"
grep -q '^See also, for example:$' "$work/tree/docs/reference/flags.md" || { echo "the test's edit of flags.md did not apply" >&2; exit 1; }
expect pass "the prose around a generated section edited"

[[ $failures -eq 0 ]] || exit 1
