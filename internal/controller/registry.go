// Package controller lists the operator's controllers by name and decides,
// from the --controllers flag, which of them run.
package controller

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/envoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/envoyconfig"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/foo"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/foobar"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/gateway"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/podset"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/watcher"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// Options carries the settings that controllers take from the command line.
type Options struct {
	// Fleet holds what every Envoy fleet gets unless its spec says otherwise.
	Fleet fleet.Defaults
	// XDS is the built-in xDS server (server.Add), which the
	// envoyconfig controller needs.
	XDS *server.Server
	// Namespace is the operator's namespace.
	Namespace string
	// Authority is the xDS CA, which issues the fleets' client
	// certificates; nil when the built-in xDS server speaks plaintext.
	Authority *authority.Store
	// Policy is the content policy of EnvoyConfigs.
	Policy translate.Policy
	// Envoy is the real Envoy that the envoyconfig controller's leader
	// loads content in before it records a revision.
	Envoy *envoyjudge.Judge
}

// Entry is one controller: its name in --controllers, and how to start it.
type Entry struct {
	Name  string
	Setup func(mgr ctrl.Manager, opts Options) error
}

// All is every controller the operator has, in the order they are started.
var All = []Entry{
	{Name: envoy.ControllerName, Setup: func(mgr ctrl.Manager, o Options) error {
		return envoy.NewReconciler(mgr, o.Fleet, o.Authority).SetupWithManager(mgr)
	}},
	{Name: envoyconfig.ControllerName, Setup: func(mgr ctrl.Manager, o Options) error {
		if o.XDS == nil {
			return fmt.Errorf("the envoyconfig controller needs the xDS server")
		}
		r := envoyconfig.NewReconciler(mgr, o.XDS, o.Namespace)
		r.Policy, r.Envoy = o.Policy, o.Envoy
		var err error
		if r.GatewayAPI, err = GatewayAPIInstalled(mgr); err != nil {
			return err
		}
		return r.SetupWithManager(mgr)
	}},
	{Name: gateway.ControllerName, Setup: func(mgr ctrl.Manager, _ Options) error {
		switch installed, err := GatewayAPIInstalled(mgr); {
		case err != nil:
			return err
		case !installed:
			mgr.GetLogger().Info("the Gateway API's CRDs are not installed: its controller does not run (install config/crd/gateway-api and restart)")
			return nil
		}
		return gateway.NewReconciler(mgr).SetupWithManager(mgr)
	}},
	{Name: foo.ControllerName, Setup: func(mgr ctrl.Manager, _ Options) error {
		return foo.NewReconciler(mgr).SetupWithManager(mgr)
	}},
	{Name: podset.ControllerName, Setup: func(mgr ctrl.Manager, _ Options) error {
		return podset.NewReconciler(mgr).SetupWithManager(mgr)
	}},
	{Name: foobar.ControllerName, Setup: func(mgr ctrl.Manager, _ Options) error {
		return foobar.NewReconciler(mgr).SetupWithManager(mgr)
	}},
	{Name: watcher.ControllerName, Setup: func(mgr ctrl.Manager, _ Options) error {
		return watcher.NewReconciler(mgr).SetupWithManager(mgr)
	}},
}

// GatewayAPIInstalled reports whether the API server serves the Gateway
// API's GA version: its controller runs, and fleets serve Gateways, only
// then.
func GatewayAPIInstalled(mgr ctrl.Manager) (bool, error) {
	_, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: gwv1.GroupName, Kind: "GatewayClass"}, gwv1.GroupVersion.Version)
	switch {
	case meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("looking for the Gateway API: %w", err)
	}
	return true, nil
}

// Names returns the names of all controllers.
func Names() []string {
	names := make([]string, 0, len(All))
	for _, e := range All {
		names = append(names, e.Name)
	}
	return names
}

// ParseSelection checks a --controllers value: a comma-separated list in
// kube-controller-manager's style, where "*" means every controller, "name"
// enables one and "-name" disables one.
func ParseSelection(value string) ([]string, error) {
	known := Names()
	var sel []string
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if item != "*" && !slices.Contains(known, strings.TrimPrefix(item, "-")) {
			return nil, fmt.Errorf("--controllers: unknown controller %q (known: %s)", item, strings.Join(known, ", "))
		}
		sel = append(sel, item)
	}
	if len(sel) == 0 {
		return nil, fmt.Errorf("--controllers: empty; use \"*\" for all controllers")
	}
	return sel, nil
}

// Enabled reports whether the selection runs the named controller. An explicit
// "name" or "-name" wins, whatever its position; otherwise "*" enables it.
func Enabled(selection []string, name string) bool {
	star := false
	for _, s := range selection {
		switch s {
		case name:
			return true
		case "-" + name:
			return false
		case "*":
			star = true
		}
	}
	return star
}

// Setup starts every enabled controller on mgr and returns their names.
func Setup(mgr ctrl.Manager, selection []string, opts Options) ([]string, error) {
	var started []string
	for _, e := range All {
		if !Enabled(selection, e.Name) {
			continue
		}
		if err := e.Setup(mgr, opts); err != nil {
			return started, fmt.Errorf("setting up controller %q: %w", e.Name, err)
		}
		started = append(started, e.Name)
	}
	return started, nil
}
