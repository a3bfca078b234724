package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
)

// gatewayRead is what diff reads of the Gateway API: the objects as the
// cluster holds them, and the files' objects as the API server would store
// them.
type gatewayRead struct {
	live  gatewayObjects
	files []gatewayFile
	// refused are the files' objects the API server would refuse (its
	// schema and validation rules): left out.
	refused  []refusal
	warnings []string
}

// readGateways reads, with the caller's credentials, what the translation
// of the Gateways that the files touch reads, as the operator reads it:
// the routes and ReferenceGrants of every namespace, the namespaces'
// labels, the Gateways and their classes, the routes' backend Services and
// the listeners' Secrets. Each object of the files is first sent to the
// API server in a dry run (a create, or an update of the live object's
// spec), which writes nothing and returns it defaulted and validated as
// it would be stored; one the caller may not dry-run is taken as written,
// with a warning. What the caller may not read is a warning too: routes
// and ReferenceGrants are then read in the namespaces of the files and of
// the Gateways; a class is taken to be this operator's; a Service or a
// Secret is left out of both sides.
func (o *options) readGateways(ctx context.Context, files []gatewayFile) (gatewayRead, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return gatewayRead{}, err
	}
	gc, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		return gatewayRead{}, err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return gatewayRead{}, err
	}
	r := gatewayRead{live: newGatewayObjects()}
	live := r.live

	// The files' objects, dry-run.
	notDefaulted := false
	for _, f := range files {
		got, err := dryRunAgainOnConflict(ctx, gc, f, live)
		switch {
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsNotFound(err):
			// Against the schema or its rules, or in a namespace that does
			// not exist: the API server would refuse it.
			r.refused = append(r.refused, refusal{Where: f.where, Message: fmt.Sprintf("%s %s: %v", f.kind, f.key, err)})
		case apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err):
			if !notDefaulted {
				notDefaulted = true
				r.warnings = append(r.warnings, fmt.Sprintf("the API server did not default and validate the Gateway API objects of the files in a dry run (%v): they are taken as written", err))
			}
			r.files = append(r.files, f)
		case err != nil:
			return r, err
		default:
			r.files = append(r.files, got)
		}
	}

	// Routes and ReferenceGrants: of every namespace, as the operator
	// reads them, or of those of the files and the Gateways.
	namespaces := map[string]bool{}
	for _, f := range r.files {
		namespaces[f.key.Namespace] = true
	}
	for _, gw := range touchedGateways(live, r.files) {
		namespaces[gw.Namespace] = true
	}
	if err := listEach(ctx, "HTTPRoutes", namespaces, &r.warnings, func(ns string) error {
		list, err := gc.GatewayV1().HTTPRoutes(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, it := range list.Items {
				live.httpRoutes[types.NamespacedName{Namespace: it.Namespace, Name: it.Name}] = it
			}
		}
		return err
	}); err != nil {
		return r, err
	}
	if err := listEach(ctx, "GRPCRoutes", namespaces, &r.warnings, func(ns string) error {
		list, err := gc.GatewayV1().GRPCRoutes(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, it := range list.Items {
				live.grpcRoutes[types.NamespacedName{Namespace: it.Namespace, Name: it.Name}] = it
			}
		}
		return err
	}); err != nil {
		return r, err
	}
	if err := listEach(ctx, "ReferenceGrants", namespaces, &r.warnings, func(ns string) error {
		list, err := gc.GatewayV1beta1().ReferenceGrants(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, it := range list.Items {
				live.grants[types.NamespacedName{Namespace: it.Namespace, Name: it.Name}] = it
			}
		}
		return err
	}); err != nil {
		return r, err
	}
	switch list, err := kc.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); {
	case apierrors.IsForbidden(err):
		r.warnings = append(r.warnings, fmt.Sprintf("the namespaces' labels, which listeners select routes by, are left out: %v", err))
	case err != nil:
		return r, err
	default:
		for _, ns := range list.Items {
			live.namespaces[ns.Name] = ns.Labels
		}
	}

	// The Gateways, as the cluster holds them and as the files have them,
	// and their classes.
	touched := touchedGateways(live, r.files)
	for _, key := range touched {
		gw, err := gc.GatewayV1().Gateways(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return r, fmt.Errorf("reading Gateway %s: %w", key, err)
		}
		live.gateways[key] = *gw
	}
	after := live.with(r.files, time.Now())
	for _, key := range touched {
		gw, ok := after.gateways[key]
		if !ok {
			continue
		}
		name := string(gw.Spec.GatewayClassName)
		if _, done := live.classes[name]; done {
			continue
		}
		class, err := gc.GatewayV1().GatewayClasses().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case apierrors.IsForbidden(err):
			r.warnings = append(r.warnings, fmt.Sprintf("GatewayClass %s is taken to be served by %s: %v", name, gateway.ControllerName, err))
			live.classes[name] = nil
		case err != nil:
			return r, err
		default:
			live.classes[name] = class
		}
	}

	// The backends and certificates of both sides.
	var services, secrets []types.NamespacedName
	for _, objs := range []gatewayObjects{live, after} {
		for _, key := range touched {
			if in, ok := objs.input(key, nil); ok {
				services = append(services, gateway.BackendServices(in)...)
				secrets = append(secrets, gateway.CertificateSecrets(in.Gateway)...)
			}
		}
	}
	for _, key := range unique(services) {
		svc, err := kc.CoreV1().Services(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case apierrors.IsForbidden(err):
			r.warnings = append(r.warnings, fmt.Sprintf("backend Service %s is left out, on both sides: %v", key, err))
		case err != nil:
			return r, err
		default:
			live.services[key] = *svc
		}
	}
	for _, key := range unique(secrets) {
		s, err := kc.CoreV1().Secrets(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case apierrors.IsForbidden(err):
			r.warnings = append(r.warnings, fmt.Sprintf("the certificate of Secret %s is left out, on both sides: %v", key, err))
		case err != nil:
			return r, err
		default:
			live.secrets[key] = *s
		}
	}
	return r, nil
}

// listEach calls list for every namespace (""), or, when the caller may
// not list across namespaces, for each of namespaces, with a warning.
func listEach(ctx context.Context, what string, namespaces map[string]bool, warnings *[]string, list func(ns string) error) error {
	err := list(metav1.NamespaceAll)
	if !apierrors.IsForbidden(err) {
		return err
	}
	ns := slices.Sorted(maps.Keys(namespaces))
	*warnings = append(*warnings, fmt.Sprintf("%s are read in namespaces %v only: %v", what, ns, err))
	for _, n := range ns {
		if err := list(n); err != nil && !apierrors.IsForbidden(err) {
			return err
		}
	}
	return ctx.Err()
}

func unique(keys []types.NamespacedName) []types.NamespacedName {
	var out []types.NamespacedName
	for _, k := range keys {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// dryRunAgainOnConflict is dryRun, tried again on a conflict: the live
// object it reads for the dry run may change before it (the operator writes
// a route's status as its proxies answer), so it reads it again, as an
// apply would.
func dryRunAgainOnConflict(ctx context.Context, gc gatewayclient.Interface, f gatewayFile, live gatewayObjects) (got gatewayFile, err error) {
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err = dryRun(ctx, gc, f, live)
		return err
	})
	return got, err
}

// dryRun sends f's object to the API server in a dry run: an update of
// the live object with f's spec, or a create. It returns f with the object
// as the server would store it, and adds the live object it read to live
// (so that the Gateways a route leaves count among those it touches).
func dryRun(ctx context.Context, gc gatewayclient.Interface, f gatewayFile, live gatewayObjects) (gatewayFile, error) {
	dry := []string{metav1.DryRunAll}
	ns, name := f.key.Namespace, f.key.Name
	var err error
	switch {
	case f.gateway != nil:
		c := gc.GatewayV1().Gateways(ns)
		var out *gwv1.Gateway
		if obj, gerr := c.Get(ctx, name, metav1.GetOptions{}); gerr == nil {
			live.gateways[f.key] = *obj.DeepCopy()
			obj.Spec = f.gateway.Spec
			out, err = c.Update(ctx, obj, metav1.UpdateOptions{DryRun: dry})
		} else if apierrors.IsNotFound(gerr) {
			out, err = c.Create(ctx, f.gateway, metav1.CreateOptions{DryRun: dry})
		} else {
			err = gerr
		}
		if err == nil {
			f.gateway = out
		}
	case f.http != nil:
		c := gc.GatewayV1().HTTPRoutes(ns)
		var out *gwv1.HTTPRoute
		if obj, gerr := c.Get(ctx, name, metav1.GetOptions{}); gerr == nil {
			live.httpRoutes[f.key] = *obj.DeepCopy()
			obj.Spec = f.http.Spec
			out, err = c.Update(ctx, obj, metav1.UpdateOptions{DryRun: dry})
		} else if apierrors.IsNotFound(gerr) {
			out, err = c.Create(ctx, f.http, metav1.CreateOptions{DryRun: dry})
		} else {
			err = gerr
		}
		if err == nil {
			f.http = out
		}
	case f.grpc != nil:
		c := gc.GatewayV1().GRPCRoutes(ns)
		var out *gwv1.GRPCRoute
		if obj, gerr := c.Get(ctx, name, metav1.GetOptions{}); gerr == nil {
			live.grpcRoutes[f.key] = *obj.DeepCopy()
			obj.Spec = f.grpc.Spec
			out, err = c.Update(ctx, obj, metav1.UpdateOptions{DryRun: dry})
		} else if apierrors.IsNotFound(gerr) {
			out, err = c.Create(ctx, f.grpc, metav1.CreateOptions{DryRun: dry})
		} else {
			err = gerr
		}
		if err == nil {
			f.grpc = out
		}
	case f.grant != nil:
		c := gc.GatewayV1beta1().ReferenceGrants(ns)
		if obj, gerr := c.Get(ctx, name, metav1.GetOptions{}); gerr == nil {
			live.grants[f.key] = *obj.DeepCopy()
			obj.Spec = f.grant.Spec
			f.grant, err = c.Update(ctx, obj, metav1.UpdateOptions{DryRun: dry})
		} else if apierrors.IsNotFound(gerr) {
			f.grant, err = c.Create(ctx, f.grant, metav1.CreateOptions{DryRun: dry})
		} else {
			err = gerr
		}
	}
	return f, err
}

// gatewaySecretsInto adds the Secrets the Gateways' Configs serve to
// secrets, by namespace (the Gateway's) and the name the Configs give them.
func gatewaySecretsInto(secrets map[string]map[string]corev1.Secret, changes []gatewayChange) {
	for _, c := range changes {
		if len(c.secrets) == 0 {
			continue
		}
		if secrets[c.gateway.Namespace] == nil {
			secrets[c.gateway.Namespace] = map[string]corev1.Secret{}
		}
		maps.Copy(secrets[c.gateway.Namespace], c.secrets)
	}
}
