#!/usr/bin/env bash
# hack/image/libc6.sh ARCH DIR: Debian's libc6 for ARCH (amd64 or arm64), at
# the version and sha256 pinned in hack/image/libc6.txt, extracted into
# DIR/libc6 (dpkg-deb -x). DIR/libc6.version, written last, names what it
# holds: make's target. hack/image takes from it what Envoy needs.
#
# apt-get downloads the package from this machine's package sources, with a
# package list of its own (tmp/apt-image) that covers ARCH: another
# architecture needs no dpkg --add-architecture, and the machine's apt state
# is left as it was. The .deb is kept in bin/image-deps/debs, checked against
# its pin at each use, and downloaded only when missing.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ $# -ne 2 ]]; then
  echo "usage: hack/image/libc6.sh ARCH DIR" >&2
  exit 2
fi
arch=$1 dir=$2
pins=$ROOT/hack/image/libc6.txt
read -r ver sum < <(awk -v a="$arch" '$1 == a { print $2, $3 }' "$pins") || true
if [[ -z ${ver:-} || -z ${sum:-} ]]; then
  echo "hack/image/libc6.sh: hack/image/libc6.txt pins no libc6 for the architecture $arch" >&2
  exit 1
fi
debs=$ROOT/bin/image-deps/debs
deb=$debs/libc6_${ver//:/%3a}_$arch.deb
pinned() { [[ -f $deb ]] && echo "$sum  $deb" | sha256sum --check --status; }
if ! pinned; then
  state=$ROOT/tmp/apt-image
  mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$debs"
  apt=(-qq -o Dir::State::Lists="$state/lists" -o Dir::Cache="$state/cache"
    -o APT::Architectures::="$arch" -o APT::Sandbox::User="$(id -un)" -o Debug::NoLocking=1)
  apt-get "${apt[@]}" update
  rm -f "$deb"
  if ! (cd "$debs" && apt-get "${apt[@]}" download "libc6:$arch=$ver"); then
    echo "hack/image/libc6.sh: the package sources have no libc6 $ver for $arch (pinned in hack/image/libc6.txt):" \
      "pin the version that \`apt-cache policy libc6:$arch\` names and its SHA256" >&2
    exit 1
  fi
  if ! pinned; then
    echo "hack/image/libc6.sh: libc6 $ver for $arch has the sha256 $(sha256sum <"$deb" | cut -d' ' -f1)," \
      "hack/image/libc6.txt pins $sum" >&2
    rm -f "$deb"
    exit 1
  fi
fi
rm -rf "$dir/libc6" "$dir/libc6.tmp" "$dir/libc6.version"
mkdir -p "$dir"
dpkg-deb -x "$deb" "$dir/libc6.tmp"
mv "$dir/libc6.tmp" "$dir/libc6"
echo "libc6 $ver $arch" >"$dir/libc6.version"
echo "${dir#"$ROOT"/}/libc6: libc6 $ver for $arch"
