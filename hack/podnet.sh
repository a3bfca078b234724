#!/usr/bin/env bash
# The pods' network on this host: KWOK's pods run nothing, and take their
# addresses from their node's podCIDR (10.0.N.0/24 on kwokctl's nodes). So
# that a fleet's Envoys, running here as processes, reach the pods behind a
# Service through its EndpointSlices, this routes 10.0.0.0/16 into a network
# namespace of its own, a test host where every address of the range is
# local, and where test backends (internal/testing/podnet) answer as the pod
# whose address they were reached at. Nothing of the range leaves the host.
#
#   hack/podnet.sh up      make the namespace kec-pods and the route, or reuse them
#   hack/podnet.sh down    remove them
#   hack/podnet.sh pods-down   remove every pod's own namespace (below) that is left
#   hack/podnet.sh check   exit 0 when it can be made here (root, iproute2)
#
# It needs root (ip netns, ip route). The host side of the link is
# 169.254.99.1, the namespace's 169.254.99.2.
#
# A pod that runs a process here (an Envoy, an echo backend) gets a network
# namespace of its own, kec-pod-<hash>, linked to the host by kecp<hash>,
# with a /32 route to its address (internal/testing/podnet, AddPod); those
# who make them remove them, and pods-down removes any that is left (down
# does not: another run's pods may be using theirs).
set -euo pipefail
NS=${PODNET_NS:-kec-pods}
CIDR=${PODNET_CIDR:-10.0.0.0/16}
HOST_IF=kecpods0
NS_IF=kecpods1

can() { [[ $(id -u) == 0 ]] && command -v ip >/dev/null; }

case ${1:?usage: hack/podnet.sh up|down|pods-down|check} in
check)
  can
  ;;
up)
  can || { echo "podnet: the pods' network needs root and iproute2" >&2; exit 1; }
  if ip netns list | grep -qw "$NS" && ip route show "$CIDR" | grep -q "$HOST_IF"; then
    exit 0
  fi
  "$0" down
  ip netns add "$NS"
  ip link add "$HOST_IF" type veth peer name "$NS_IF" netns "$NS"
  ip addr add 169.254.99.1/30 dev "$HOST_IF"
  ip link set "$HOST_IF" up
  ip -n "$NS" link set lo up
  ip -n "$NS" addr add 169.254.99.2/30 dev "$NS_IF"
  ip -n "$NS" link set "$NS_IF" up
  # Every address of the range is the test host's own.
  ip -n "$NS" route add local "$CIDR" dev lo
  ip -n "$NS" route add default via 169.254.99.1
  ip route add "$CIDR" via 169.254.99.2 src 169.254.99.1
  # The pods that have a namespace of their own already: NS sends their
  # addresses back to the host, as AddPod does.
  for pod in $(ip netns list | awk '$1 ~ /^kec-pod-/ {print $1}'); do
    for ip in $(ip -n "$pod" -4 -o addr show dev eth0 | awk '{split($4, a, "/"); print a[1]}'); do
      ip -n "$NS" route replace "$ip/32" via 169.254.99.1 dev "$NS_IF" table local
    done
  done
  echo "podnet: $CIDR is routed to the network namespace $NS" >&2
  ;;
pods-down)
  for pod in $(ip netns list | awk '$1 ~ /^kec-pod-/ {print $1}'); do
    ip link del "kecp${pod#kec-pod-}" 2>/dev/null || true
    ip netns del "$pod"
  done
  # The pods' addresses that NS sends back to the host (AddPod).
  if ip netns list | grep -qw "$NS"; then
    for ip in $(ip -n "$NS" route show table local | awk '$2 == "via" && $3 == "169.254.99.1" {print $1}'); do
      ip -n "$NS" route del "$ip/32" table local
    done
  fi
  ;;
down)
  ip route del "$CIDR" via 169.254.99.2 2>/dev/null || true
  ip link del "$HOST_IF" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
  ;;
esac
