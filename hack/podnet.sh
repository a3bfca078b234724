#!/usr/bin/env bash
# The pods' network on this host: KWOK's pods run nothing, and take their
# addresses from their node's podCIDR (10.0.N.0/24 on kwokctl's nodes). So
# that a fleet's Envoys, running here as processes, reach the pods behind a
# Service through its EndpointSlices, this routes 10.0.0.0/16 into a network
# namespace of its own, a test host where every address of the range is
# local, and where test backends (internal/testing/podnet) answer as the pod
# whose address they were reached at. Nothing of the range leaves the host.
#
#   hack/podnet.sh up      make the namespace and the route, or reuse them
#   hack/podnet.sh down    remove them
#   hack/podnet.sh pods-down   remove every pod's own namespace (below) of this network that is left
#   hack/podnet.sh check   exit 0 when it can be made here (root, iproute2)
#   hack/podnet.sh names   print the network's names (NS, CIDR, links, addresses)
#
# PODNET=N (0 to 63, default 0) picks one of several such networks, so that
# suites run at once each have their own, with their own cluster
# (hack/cluster.sh gives its nodes pod CIDRs of the same range): network N
# is the namespace kec-pods (N=0) or kec-pods-N and the range 10.N.0.0/16;
# its link is kecpodsh<N> on the host, 169.254.99.(4N+1)/30, and kecpodsn<N>
# in the namespace, 169.254.99.(4N+2); its load balancers take
# 127.(N+1).0.0/16 (internal/testing/podnet.Network derives the same).
#
# It needs root (ip netns, ip route).
#
# A pod that runs a process here (an Envoy, an echo backend) gets a network
# namespace of its own, kec-pod-<hash>, linked to the host by kecp<hash>,
# with a /32 route to its address (internal/testing/podnet, AddPod); those
# who make them remove them, and pods-down removes any of this network's
# range that is left (down does not: another run's pods may be using theirs).
set -euo pipefail
N=${PODNET:-0}
[[ $N =~ ^[0-9]+$ ]] && ((N < 64)) || { echo "podnet: PODNET=$N: want a pods' network from 0 to 63" >&2; exit 2; }
if ((N == 0)); then NS=kec-pods; else NS=kec-pods-$N; fi
CIDR=10.$N.0.0/16
HOST_IF=kecpodsh$N
NS_IF=kecpodsn$N
HOST_ADDR=169.254.99.$((4 * N + 1))
NS_ADDR=169.254.99.$((4 * N + 2))
LB_CIDR=127.$((N + 1)).0.0/16

can() { [[ $(id -u) == 0 ]] && command -v ip >/dev/null; }
# netns_up NAME: the network namespace NAME exists (exactly that name). The
# list is read whole first: grep -q ends a pipe at its first match, and with
# pipefail the writer's SIGPIPE would turn a match into a failure.
netns_up() {
  local names
  names=$(ip netns list | awk '{print $1}') && grep -qxF "$1" <<<"$names"
}
# pod_addrs POD: the addresses of this network's range on the pod's eth0.
pod_addrs() {
  ip -n "$1" -4 -o addr show dev eth0 2>/dev/null | awk -v p="10.$N." '{split($4, a, "/"); if (index(a[1], p) == 1) print a[1]}'
}

case ${1:?usage: hack/podnet.sh up|down|pods-down|check|names} in
check)
  can
  ;;
names)
  printf '%s\n' "namespace $NS" "cidr $CIDR" "host-link $HOST_IF $HOST_ADDR" "namespace-link $NS_IF $NS_ADDR" "load-balancers $LB_CIDR"
  ;;
up)
  can || { echo "podnet: the pods' network needs root and iproute2" >&2; exit 1; }
  if netns_up "$NS" && grep -qw "$HOST_IF" <<<"$(ip route show "$CIDR")"; then
    exit 0
  fi
  "$0" down
  ip netns add "$NS"
  ip link add "$HOST_IF" type veth peer name "$NS_IF" netns "$NS"
  ip addr add "$HOST_ADDR/30" dev "$HOST_IF"
  ip link set "$HOST_IF" up
  ip -n "$NS" link set lo up
  ip -n "$NS" addr add "$NS_ADDR/30" dev "$NS_IF"
  ip -n "$NS" link set "$NS_IF" up
  # Every address of the range is the test host's own.
  ip -n "$NS" route add local "$CIDR" dev lo
  ip -n "$NS" route add default via "$HOST_ADDR"
  ip route add "$CIDR" via "$NS_ADDR" src "$HOST_ADDR"
  # This network's pods that have a namespace of their own already: NS
  # sends their addresses back to the host, as AddPod does.
  for pod in $(ip netns list | awk '$1 ~ /^kec-pod-/ {print $1}'); do
    for ip in $(pod_addrs "$pod"); do
      ip -n "$NS" route replace "$ip/32" via "$HOST_ADDR" dev "$NS_IF" table local
    done
  done
  echo "podnet: $CIDR is routed to the network namespace $NS" >&2
  ;;
pods-down)
  for pod in $(ip netns list | awk '$1 ~ /^kec-pod-/ {print $1}'); do
    [[ -n $(pod_addrs "$pod") ]] || continue # another network's, or none's
    ip link del "kecp${pod#kec-pod-}" 2>/dev/null || true
    ip netns del "$pod"
  done
  # The pods' addresses that NS sends back to the host (AddPod).
  if netns_up "$NS"; then
    for ip in $(ip -n "$NS" route show table local | awk -v h="$HOST_ADDR" '$2 == "via" && $3 == h {print $1}'); do
      ip -n "$NS" route del "$ip/32" table local
    done
  fi
  ;;
down)
  ip route del "$CIDR" via "$NS_ADDR" 2>/dev/null || true
  ip link del "$HOST_IF" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
  ;;
esac
