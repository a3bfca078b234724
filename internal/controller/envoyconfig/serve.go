package envoyconfig

import (
	"context"
	"fmt"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// serving is what a replica does with the fleet on its xDS server.
type serving int

const (
	// keepServing: the history is missing or unreadable; nothing served
	// changes until the leader records it again.
	keepServing serving = iota
	// serveRevision: the history's served revision, rendered with the
	// endpoints and Secrets as they are now.
	serveRevision
	// serveIR: a fleet that never had an EnvoyConfig gets its (empty) IR.
	serveIR
	// serveNothing: the history records that nothing is served.
	serveNothing
)

// servingOf decides what is served from the recorded history h, readable
// when it is what the API server holds; unrecorded when the fleet never
// had an EnvoyConfig.
func servingOf(h publish.History, readable, unrecorded bool) serving {
	switch {
	case h.Served() != nil:
		return serveRevision
	case unrecorded:
		return serveIR
	case readable && h.Current == "":
		return serveNothing
	}
	return keepServing
}

// serve is every replica's phase: it serves what is recorded.
func (r *Reconciler) serve(ctx context.Context, w *world, ir translate.IR, rec recording) error {
	switch servingOf(rec.history, rec.readable, w.unrecorded()) {
	case serveRevision:
		resources, _ := translate.Render(r.Policy.ForFleet(w.envoy), rec.history.Served().Configs, w.current, w.slices, w.secrets)
		var staged *server.Staged
		if prev, ok := rec.history.Staged(); ok {
			// While the served revision rolls out, the proxies its step does
			// not lead are served the previous one, with the same endpoints
			// and Secrets: those are not staged.
			prevResources, _ := translate.Render(r.Policy.ForFleet(w.envoy), prev.Configs, w.current, w.slices, w.secrets)
			staged = &server.Staged{Rollout: *rec.history.Rollout, Version: prev.Version, Resources: prevResources}
		}
		if err := r.Server.SetFleetRollout(ctx, w.id.String(), rec.history.Current, resources, staged); err != nil {
			return fmt.Errorf("serving %s: %w", w.id, err)
		}
		return nil
	case serveIR:
		return r.set(ctx, w, ir.Version, ir.Resources)
	case serveNothing:
		r.Server.ClearFleet(w.id.String())
	}
	return nil
}

func (r *Reconciler) set(ctx context.Context, w *world, version string, resources map[string][]types.Resource) error {
	if err := r.Server.SetFleet(ctx, w.id.String(), version, resources); err != nil {
		return fmt.Errorf("serving %s: %w", w.id, err)
	}
	return nil
}

// forget is the phase of a fleet that is gone: no replica serves it, and
// the leader deletes its history.
func (r *Reconciler) forget(ctx context.Context, w *world, leader bool) error {
	r.Server.ClearFleet(w.id.String())
	r.accepted.forget(w.id)
	r.awaiting.forget(w.id)
	exportStep(w.id.String(), publish.RolloutDecision{}) // no step of it is judged any more
	if !leader {
		return nil
	}
	return r.Histories.Forget(ctx, w.stored)
}
