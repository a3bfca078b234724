#!/usr/bin/env bash
# The install test: the Helm chart (make chart) installed with helm install
# on a fresh local cluster; then, on the cluster made afresh, dist/install.yaml
# (make installer) applied with server-side apply, then the operator binary on this
# host running as the installed ServiceAccount (a token from the TokenRequest
# API), so that its RBAC is exercised for real; then
# `go test -tags install ./test/install/...`. KWOK nodes run no containers, so
# the operator's own pods are admitted and scheduled but do not run it.
# Everything it starts is stopped again when it exits, on failure too.
# Arguments are passed to go test. LDFLAGS stamps the binary (make passes it).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
envoy_inotify # real Envoys run on this host

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
NAME=${INSTALL_CLUSTER:-kec-install}
DIR=$ROOT/tmp/$NAME
op_pid=""
start=$SECONDS
step() { echo "[$((SECONDS - start))s] $*" >&2; }

install_cleanup

hack/cluster.sh down "$NAME" # whatever an earlier run left
hack/cluster.sh up "$NAME" --kube-apiserver-port 0
export KUBECONFIG=$DIR/kubeconfig
step "cluster $NAME is up"

# The chart, installed as a user would: its release in the namespace default,
# its objects in kube-envoy-controller. Its CRDs are established and the
# operator's Deployment, Helm's, becomes available. TestChartRendersInstaller
# shows that with these values it renders the objects of dist/install.yaml.
# Then the cluster is made afresh for dist/install.yaml: server-side apply
# over Helm's objects conflicts with Helm's ownership of atomic fields that
# the API server completed with defaults (an env's fieldRef, a policy's
# matchConstraints) and of the label app.kubernetes.io/managed-by, which Helm
# sets to Helm.
charts=(dist/kube-envoy-controller-*.tgz)
if [[ ${#charts[@]} -ne 1 || ! -f ${charts[0]} ]]; then
  echo "want one chart in dist/ (make chart), found: ${charts[*]}" >&2
  exit 1
fi
chart=$ROOT/${charts[0]}
export HELM_CACHE_HOME=$DIR/helm/cache HELM_CONFIG_HOME=$DIR/helm/config HELM_DATA_HOME=$DIR/helm/data
bin/helm install kube-envoy-controller "$chart" --namespace default --wait --timeout 2m >"$DIR/helm-install.log"
crds=$(bin/helm show crds "$chart" | grep -c '^kind: CustomResourceDefinition')
established=$(bin/helm show crds "$chart" | bin/kubectl wait --for condition=Established --timeout 1m -f - | wc -l)
owner=$(bin/kubectl -n kube-envoy-controller get deployment kube-envoy-controller -o jsonpath='{.metadata.annotations.meta\.helm\.sh/release-name}')
if [[ $crds -eq 0 || $established -ne $crds || $owner != kube-envoy-controller ]]; then
  echo "helm install: $established of the chart's $crds CRDs established; the Deployment's release: '$owner'" >&2
  exit 1
fi
step "the chart ${charts[0]#dist/} is installed: $crds CRDs established, the Deployment is available"
# An upgrade with a changed value reaches the Deployment, and a rollback
# takes it back: the release's objects are Helm's to change.
bin/helm upgrade kube-envoy-controller "$chart" --namespace default --reuse-values --set replicas=3 --wait --timeout 2m >"$DIR/helm-upgrade.log"
upgraded=$(bin/kubectl -n kube-envoy-controller get deployment kube-envoy-controller -o jsonpath='{.spec.replicas}/{.status.availableReplicas}')
bin/helm rollback kube-envoy-controller 1 --namespace default --wait --timeout 2m >>"$DIR/helm-upgrade.log"
rolled_back=$(bin/kubectl -n kube-envoy-controller get deployment kube-envoy-controller -o jsonpath='{.spec.replicas}')
revision=$(bin/helm history kube-envoy-controller --namespace default --max 1 -o json | sed -n 's/.*"revision":\([0-9]*\).*/\1/p')
if [[ $upgraded != 3/3 || $rolled_back != 2 || $revision != 3 ]]; then
  echo "helm upgrade --set replicas=3: the Deployment's replicas/available are $upgraded; after helm rollback 1: $rolled_back replicas, release revision '$revision'" >&2
  exit 1
fi
step "helm upgrade --set replicas=3 reached the Deployment (3/3), and helm rollback took it back to 2"
hack/cluster.sh down "$NAME"
hack/cluster.sh up "$NAME" --kube-apiserver-port 0
step "cluster $NAME is up afresh"

# Every object of the installer is accepted: server-side apply fails otherwise.
objects=$(grep -c '^kind:' dist/install.yaml)
applied=$(bin/kubectl apply --server-side -f dist/install.yaml | tee "$DIR/apply.log" | wc -l)
if [[ $applied -ne $objects ]]; then
  echo "dist/install.yaml has $objects objects, $applied were applied:" >&2
  cat "$DIR/apply.log" >&2
  exit 1
fi
# The operator's pods pass the restricted Pod Security profile and are scheduled.
bin/kubectl -n kube-envoy-controller rollout status deployment/kube-envoy-controller --timeout 2m >/dev/null
step "dist/install.yaml applied: $applied objects; the Deployment is available"

# A kubeconfig with the ServiceAccount's token instead of the admin's certificate.
server=$(bin/kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
bin/kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d >"$DIR/ca.crt"
token=$(bin/kubectl -n kube-envoy-controller create token kube-envoy-controller --duration 1h)
sa_kubeconfig=$DIR/serviceaccount.kubeconfig
rm -f "$sa_kubeconfig"
KUBECONFIG=$sa_kubeconfig bin/kubectl config set-cluster install --server "$server" --certificate-authority "$DIR/ca.crt" --embed-certs >/dev/null
KUBECONFIG=$sa_kubeconfig bin/kubectl config set-credentials kube-envoy-controller --token "$token" >/dev/null
KUBECONFIG=$sa_kubeconfig bin/kubectl config set-context install --cluster install --user kube-envoy-controller >/dev/null
KUBECONFIG=$sa_kubeconfig bin/kubectl config use-context install >/dev/null
[[ $(bin/kubectl --kubeconfig "$sa_kubeconfig" auth whoami -o jsonpath='{.status.userInfo.username}') == \
  system:serviceaccount:kube-envoy-controller:kube-envoy-controller ]]

# The webhook configurations call the operator on this host instead of the Service.
webhook_port=$(free_ports 1)
hack/webhook-local.sh "$webhook_port"

go build -ldflags "${LDFLAGS:-}" -o "$DIR/kube-envoy-controller" ./cmd/kube-envoy-controller
step "the operator is built; running the tests"

INSTALL_ROOT=$ROOT INSTALL_DIR=$DIR INSTALL_SA_KUBECONFIG=$sa_kubeconfig INSTALL_BINARY=$DIR/kube-envoy-controller \
  INSTALL_WEBHOOK_PORT=$webhook_port INSTALL_VERSION=${VERSION:-} INSTALL_CHART=$chart \
  go test -vet=off -tags install -count=1 -timeout 15m ./test/install/... "$@"
step "done"
if [[ -f $DIR/failover.txt ]]; then
  echo "Leader takeover (docs/benchmarks.md):" >&2
  cat "$DIR/failover.txt" >&2
fi
