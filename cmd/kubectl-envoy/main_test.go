package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Commands that fail before they reach anything: what they say.
func TestCommandErrors(t *testing.T) {
	kubeconfig := unreachableKubeconfig(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"proxy-status", "--as", "alice"}, "not supported: the operator's debug endpoint does not impersonate"},
		{[]string{"config-dump", "edge", "--type", "routers"}, `unknown type "routers": want one of listeners, routes, clusters, endpoints, secrets`},
		{[]string{"config-dump"}, "accepts 1 arg(s), received 0"},
		{[]string{"validate"}, "-f is required"},
		{[]string{"proxy-status", "a", "b"}, "accepts at most 1 arg(s), received 2"},
		{[]string{"proxy-status", "tlsroute/x"}, `"tlsroute/x": the kind is one of envoy, gateway, httproute or grpcroute`},
		{[]string{"proxy-status", "gateway/edge", "-o", "wide"}, `unknown output format "wide": want table, json or yaml`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			cmd := newRootCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &errOut})
			cmd.SetArgs(append(tt.args, "--kubeconfig", kubeconfig))
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// unreachableKubeconfig is a kubeconfig whose API server nothing answers,
// with team as its context's namespace.
func unreachableKubeconfig(t *testing.T) string {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: team}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}
