#!/usr/bin/env bash
# `make run`: the local cluster, the CRDs, the samples and the operator in the
# foreground, and the gateway sample's proxies as real Envoy processes on this
# host (hack/hostfleet), one for each of the fleet's pods, so that xDS and
# traffic are seen at work. KWOK's pods run nothing: with root, the pods'
# addresses are routed into a network namespace where they answer as the
# pods would (hack/podnet.sh), so the Envoys reach the Service web through
# its EndpointSlices. Without Envoy (make envoy), Go stand-ins (hack/standin)
# take the proxies' place, and say so.
#
# The Gateway API samples (config/samples/gateway-api): a GatewayClass of
# this operator's, the Gateway public and two HTTPRoutes. With root and
# Envoy, the Gateway's fleet runs here too (a second hack/hostfleet): each
# of its Envoys in a network namespace of its pod's own, listening as in its
# pod, and its Service of type LoadBalancer gets an address of 127.1.0.0/16
# (the load balancers' range of the pods' network PODNET=N, default 0, is
# 127.(N+1).0.0/16: hack/podnet.sh), which forwards to the Envoys: the
# Gateway's address, which curl reaches.
# Without them the samples are applied all the same, and their proxies do
# not run (the Gateway is not Programmed), which it says.
#
# Ctrl-C stops the proxies and the operator, removes the pods' network and
# the webhook configurations, which would otherwise send every EnvoyConfig
# write and every pod create in namespaces with injection to an operator that
# no longer answers; the cluster stays up for kubectl (`make cluster-down`
# removes it). The next `make run` installs them again.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
envoy_inotify # real Envoys run on this host

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
NAME=${1:-kec-dev}
hack/cluster.sh up "$NAME"
export KUBECONFIG=$ROOT/tmp/$NAME/kubeconfig

bin/kubectl apply --server-side -f config/crd/bases -f config/crd/gateway-api >/dev/null
bin/kubectl wait --for condition=Established --timeout 60s crd --all >/dev/null
echo "CRDs installed: $(bin/kubectl get crd -o name | sed 's#.*/##' | tr '\n' ' ')"

# The operator's ports on this host: free ones, unless set, so that a second
# operator or anything else on the usual ports does not stop it.
ports=$(free_ports 5)
{ read -r free_webhook; read -r free_metrics; read -r free_health; read -r free_xds; read -r free_debug; } <<<"$ports"
WEBHOOK_PORT=${WEBHOOK_PORT:-$free_webhook}
METRICS_PORT=${METRICS_PORT:-$free_metrics}
HEALTH_PORT=${HEALTH_PORT:-$free_health}
XDS_PORT=${XDS_PORT:-$free_xds}
DEBUG_PORT=${DEBUG_PORT:-$free_debug}
# The sidecar-injection webhook, served by the operator on this host.
hack/webhook-local.sh "$WEBHOOK_PORT"

# The operator loads EnvoyConfigs in the repository's Envoy (make envoy), or
# in $ENVOY's; without one it says so, and admits on its rules alone.
ENVOY=${ENVOY:-$ROOT/bin/envoy}

# The Gateway's proxies run each in its pod's own network namespace, which
# takes root (and Envoy): they reach the operator's xDS server on this host
# at 169.254.1.1, the host's end of each pod's link, so the xDS server then
# listens on every address of this host (--xds-bind-address :PORT), not on
# the loopback alone. It answers only a client with a fleet's certificate
# (mutual TLS), from wherever it comes. Otherwise it keeps to 127.0.0.1.
gateway_skip=""
if [[ ! -x $ENVOY ]]; then
  gateway_skip="there is no Envoy at $ENVOY (make envoy)"
elif ! hack/podnet.sh check; then
  gateway_skip="not root: each of its Envoys runs in a network namespace of its pod's own, which needs root (and iproute2)"
fi
if [[ -z $gateway_skip ]]; then
  XDS_BIND=":$XDS_PORT"
else
  XDS_BIND="127.0.0.1:$XDS_PORT"
fi
# Metrics in plain HTTP, on the loopback interface only, for curl.
bin/kube-envoy-controller --kubeconfig "$KUBECONFIG" --zap-devel=false --envoy-path "$ENVOY" \
  --metrics-secure=false --metrics-bind-address "127.0.0.1:$METRICS_PORT" --health-probe-bind-address "127.0.0.1:$HEALTH_PORT" \
  --xds-bind-address "$XDS_BIND" --debug-bind-address "127.0.0.1:$DEBUG_PORT" \
  --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" --webhook-cert-dns-name localhost \
  --webhook-cert-write-files --webhook-cert-dir "$ROOT/tmp/$NAME/webhook-certs" &
op_pid=$!
standin_pid=""
gateway_pid=""
podnet=""
# Ctrl-C reaches the operator too (one process group): let it stop gracefully,
# since a second signal makes it exit at once. Otherwise stop it here.
interrupted=""
stop_foreground_operator() {
  if [[ -n $standin_pid ]]; then
    kill "$standin_pid" 2>/dev/null || true
    wait "$standin_pid" 2>/dev/null || true
  fi
  # The Gateway's host fleet removes its pods' network namespaces as it
  # stops: before the pods' network goes.
  if [[ -n $gateway_pid ]]; then
    kill "$gateway_pid" 2>/dev/null || true
    wait "$gateway_pid" 2>/dev/null || true
  fi
  if [[ -n $podnet ]]; then
    hack/podnet.sh down || true
  fi
  if [[ -n $interrupted ]]; then
    for _ in $(seq 20); do kill -0 "$op_pid" 2>/dev/null || break; sleep 0.5; done
  fi
  kill "$op_pid" 2>/dev/null || true
  wait "$op_pid" 2>/dev/null || true
  # With failurePolicy Fail, webhooks that nobody serves refuse what they match.
  bin/kubectl delete --ignore-not-found mutatingwebhookconfiguration kube-envoy-controller-injector >/dev/null || true
  bin/kubectl delete --ignore-not-found validatingwebhookconfiguration kube-envoy-controller-validator >/dev/null || true
  echo
  echo "Operator and proxies stopped, the pods' network removed; the webhook configurations are removed, so EnvoyConfigs are"
  echo "not validated and pods are not injected until the next make run."
  echo "The cluster $NAME is still up; make cluster-down removes it."
}
trap stop_foreground_operator EXIT
trap 'interrupted=1; exit 130' INT
trap 'exit 143' TERM

# The TLS sample terminates TLS with the Kubernetes TLS Secret web-tls: a
# self-signed certificate, made once per cluster.
if ! bin/kubectl get secret web-tls >/dev/null 2>&1; then
  go run ./hack/tlscert "$ROOT/tmp/$NAME/web-tls" web.example.com
  bin/kubectl create secret tls web-tls --cert "$ROOT/tmp/$NAME/web-tls/tls.crt" --key "$ROOT/tmp/$NAME/web-tls/tls.key" >/dev/null
  bin/kubectl label secret web-tls kube-envoy-controller.io/xds-secret=tls >/dev/null
fi
# The sidecar sample's pods get their Envoy in a namespace that enables
# injection: the samples go to default.
bin/kubectl label namespace default kube-envoy-controller.io/injection=enabled --overwrite >/dev/null
# The EnvoyConfig samples go through the operator's validating webhook: wait
# until it serves, and until the API server trusts its new certificate.
wait_ready "$op_pid" "$HEALTH_PORT" /dev/null
wait_webhooks
bin/kubectl apply -f config/samples/ >/dev/null
# The Gateway API samples are a directory of their own, which kubectl apply
# -f config/samples/ leaves out: they need the Gateway API's CRDs.
bin/kubectl apply -f config/samples/gateway-api/ >/dev/null
echo "Samples applied: $(ls config/samples | tr '\n' ' ')$(ls config/samples/gateway-api | sed 's#^#gateway-api/#' | tr '\n' ' ')"

# Tell the user what to look at once the samples have their pods.
bin/kubectl wait --for=jsonpath='{.status.availableReplicas}'=1 --timeout 120s foo/example-foo >/dev/null || true
bin/kubectl wait --for=jsonpath='{.status.availableReplicas}'=3 --timeout 120s envoy/edge-envoy podset/two-podset >/dev/null || true
bin/kubectl wait --for=jsonpath='{.status.availableReplicas}'=2 --timeout 120s envoy/web-gateway >/dev/null || true
bin/kubectl wait --for=condition=Accepted --timeout 60s envoyconfig --all >/dev/null || true

# KWOK's pods run no Envoy: the gateway's proxies run here, real Envoys from
# the bootstrap in the fleet's ConfigMap (hack/hostfleet), or Go stand-ins,
# real ADS clients, where there is no Envoy (hack/standin).
ENVOY=${ENVOY:-$ROOT/bin/envoy}
proxies_log=$ROOT/tmp/$NAME/proxies.log
if [[ -x $ENVOY ]]; then
  if hack/podnet.sh check; then
    hack/podnet.sh up && podnet=1
  else
    echo "Not root: the pods' network is not made (hack/podnet.sh), so the backends behind the gateway answer nothing."
  fi
  go build -o "$ROOT/tmp/$NAME/hostfleet" ./hack/hostfleet
  "$ROOT/tmp/$NAME/hostfleet" --namespace default --selector app.kubernetes.io/instance=web-gateway \
    --xds-address "127.0.0.1:$XDS_PORT" --envoy "$ENVOY" --dir "$ROOT/tmp/$NAME/proxies" >"$proxies_log" 2>&1 &
  standin_pid=$!
  proxies="real Envoys ($("$ENVOY" --version | sed -n 's/.*version: [0-9a-f]*\/\([0-9.]*\)\/.*/\1/p'))"
else
  echo "No Envoy at $ENVOY (make envoy): the gateway's proxies are Go stand-ins, which serve no traffic."
  go build -o "$ROOT/tmp/$NAME/standin" ./hack/standin
  "$ROOT/tmp/$NAME/standin" --namespace default --fleet web-gateway --xds-address "127.0.0.1:$XDS_PORT" \
    >"$proxies_log" 2>&1 &
  standin_pid=$!
  proxies="Go stand-ins"
fi
# The Gateway public's fleet (an Envoy named public that the Gateway
# controls): its Envoys in their pods' own network namespaces, and the
# load balancers of every Service of type LoadBalancer. The backends stay
# the first host fleet's (--backend-ports "": none here).
gateway_log=$ROOT/tmp/$NAME/gateway-proxies.log
bin/kubectl wait --for=jsonpath='{.status.availableReplicas}'=1 --timeout 120s envoy/public >/dev/null || true
if [[ -z $gateway_skip ]]; then
  "$ROOT/tmp/$NAME/hostfleet" --namespace default --selector app.kubernetes.io/instance=public \
    --xds-address "127.0.0.1:$XDS_PORT" --envoy "$ENVOY" --dir "$ROOT/tmp/$NAME/gateway-proxies" \
    --backend-ports "" --pod-network --load-balancers >"$gateway_log" 2>&1 &
  gateway_pid=$!
else
  echo "The Gateway public's proxies do not run: $gateway_skip. Its samples are applied; it is not Programmed."
fi
bin/kubectl wait --for=jsonpath='{.status.proxies.acked}'=2 --timeout 60s envoyconfig/web-routing envoyconfig/web-canary envoyconfig/web-tls >/dev/null || true
if [[ -z $gateway_skip ]]; then
  lb_range=$(hack/podnet.sh names | awk '$1 == "load-balancers" {print $2}')
  bin/kubectl wait --for=condition=Programmed --timeout 60s gateway/public >/dev/null || true
  gateway_msg="  Its fleet, the Envoy public, runs here: one real Envoy per pod, each in
  its pod's own network namespace (log: tmp/$NAME/gateway-proxies.log). Its
  Service, of type LoadBalancer, has an address of $lb_range, which
  forwards to the Envoys: the Gateway's address. The Gateway is Programmed
  once every proxy acknowledged what it was sent.
  bin/kubectl get gatewayclass,gateways,httproutes
  GW=\$(bin/kubectl get gateway public -o jsonpath='{.status.addresses[0].value}')
  curl -s http://\$GW/                       # the route web: a pod of web answers with its name
  curl -s http://\$GW/canary                 # the route web-canary: the pod of web-canary"
else
  gateway_msg="  Its proxies do not run: $gateway_skip. So the Gateway
  is not Programmed, and has no address.
  bin/kubectl get gatewayclass,gateways,httproutes"
fi
cat <<MSG

================================================================================
kube-envoy-controller is running against the local cluster "$NAME".

  export KUBECONFIG=$KUBECONFIG      # or: bin/kwokctl --name $NAME get kubeconfig
  bin/kubectl get foos,envoys,envoyconfigs,podsets,foobars,watchers
  bin/kubectl get deployment,pods -l controller=example-foo
  bin/kubectl describe envoy edge-envoy      # conditions and events
  bin/kubectl get configmap envoy-cfg-1 -o yaml   # the fleet's Envoy v3 bootstrap
  bin/kubectl scale envoy/edge-envoy --replicas=5

  The gateway web-gateway's two proxies are $proxies on this host, one per
  pod, named as its pods (log: tmp/$NAME/proxies.log; each Envoy's admin
  address: tmp/$NAME/proxies/POD.admin). They listen on the host's ports, as
  a Service would take the requests:
  curl -s http://127.0.0.1:8080/           # the routing sample: a pod of web answers with its name
  for i in \$(seq 100); do curl -s -o /dev/null -w '%header{x-track}\\n' http://127.0.0.1:8081/; done | sort | uniq -c
                                           # the canary: about 90 stable, 10 canary
  curl -s --cacert tmp/$NAME/web-tls/tls.crt --resolve web.example.com:8443:127.0.0.1 https://web.example.com:8443/
                                           # TLS terminated with the Secret web-tls

  What every proxy runs, with the kubectl plugin (bin/kubectl-envoy; kubectl
  finds it on PATH). The operator runs on this host, without pods: it records
  its debug endpoint's loopback address in a Lease of its namespace, where
  the plugin finds it:
  export PATH=$ROOT/bin:\$PATH
  kubectl envoy proxy-status -A
  kubectl envoy config-dump web-gateway --type routes
  curl -s "\$(cat tmp/$NAME/proxies/*.admin | head -1)/config_dump?resource=dynamic_route_configs"
                                           # what Envoy itself says it runs
  kubectl envoy validate -f config/samples/

  The EnvoyConfig samples, served by the operator's xDS server:
  bin/kubectl get envoyconfigs             # web-routing, web-canary, web-tls (2 proxies acked), shop-routes, greeter-routes
  bin/kubectl get pods -l app=shop -o jsonpath='{.items[0].spec.initContainers[*].name} {.items[0].spec.containers[*].name}'   # envoy shop: Envoy is a native sidecar

  The Gateway API sample (config/samples/gateway-api): the GatewayClass
  kube-envoy-controller, the Gateway public, with an HTTP listener on port
  80, and two HTTPRoutes, / to the Service web and /canary to web-canary.
$gateway_msg

  The operator's ports: metrics http://127.0.0.1:$METRICS_PORT/metrics,
  probes http://127.0.0.1:$HEALTH_PORT/readyz, xDS $XDS_BIND,
  debug https://127.0.0.1:$DEBUG_PORT (kubectl envoy),
  webhook https://localhost:$WEBHOOK_PORT (set METRICS_PORT, HEALTH_PORT,
  XDS_PORT, DEBUG_PORT or WEBHOOK_PORT to choose them).

Ctrl-C stops the operator and the proxies, and removes the pods' network and the webhook configurations. make cluster-down removes the cluster.
================================================================================

MSG
bin/kubectl get foos,envoys,envoyconfigs,podsets,foobars,watchers
wait "$op_pid"
