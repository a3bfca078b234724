package envoyconfig

import (
	"context"
	"sync"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyload"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// judge is the leader's phase before it records: it has a real Envoy
// (r.Envoy) load, alone (beside stand-ins of the fleet's clusters it
// names), each EnvoyConfig's current content that ir would
// serve and that no revision of the fleet's history holds, and, when Envoy
// refused some or could not judge it, translates in again with Envoy's
// verdicts (translate.Input.Envoy), so that content Envoy refuses is never
// recorded. Content a recorded revision holds was
// judged before it was recorded, or served before Envoy judged: it is not
// judged again. Without an Envoy, every content ir would serve is marked
// unjudged, and its status says why. retry is set when a verdict may be
// another on a second try (Envoy timed out, or could not run): the fleet is
// judged again after judgeRetry.
func (r *Reconciler) judge(ctx context.Context, w *world, in translate.Input, ir translate.IR) (_ translate.IR, retry bool) {
	unavailable := ""
	switch {
	case r.Envoy == nil:
		unavailable = "no Envoy was configured to load it in"
	case r.Envoy.Unavailable() != nil:
		unavailable = r.Envoy.Unavailable().Error()
	}
	// What the history's revisions hold of each EnvoyConfig, by name: its
	// content's hash is taken only for an EnvoyConfig that would be served.
	byName := map[string][]translate.Config{}
	for _, rev := range w.stored.History.Revisions {
		for _, c := range rev.Configs {
			byName[c.Name] = append(byName[c.Name], c)
		}
	}
	recorded := func(name, content string) bool {
		for _, c := range byName[name] {
			if translate.ContentOf(c) == content {
				return true
			}
		}
		return false
	}
	if w.gateway != nil && r.withholdRejectedRoutes(w, ir) {
		// Every proxy rejected routes' rules of the Gateway's content: it is
		// translated again without them.
		in.Configs = w.current
		ir = translate.Translate(in)
	}
	if w.gateway != nil {
		// Content of the Gateway that the rules refuse: translate it again
		// without the routes that are refused alone.
		if st := ir.Configs[w.gateway.out.Config.Name]; len(st.Invalid) > 0 || len(st.Refused) > 0 {
			again, routesRetry := r.isolateRoutes(ctx, w, in, unavailable)
			retry = retry || routesRetry
			if again {
				in.Configs = w.current
				ir = translate.Translate(in)
			}
		}
	}
	verdicts := map[string]translate.EnvoyVerdict{}
	var load []translate.Config
	for _, c := range w.current {
		st := ir.Configs[c.Name]
		switch {
		case st.Choice != translate.ChoiceCurrent:
		case unavailable != "":
			verdicts[c.Name] = translate.EnvoyVerdict{Content: st.Content, Unjudged: unavailable}
		case !recorded(c.Name, st.Content):
			load = append(load, c)
		}
	}
	// The fleet's clusters, which each is loaded beside as stand-ins
	// (envoyload.Resources.WithClusters).
	var clusters []string
	if len(load) > 0 {
		for _, c := range w.current {
			clusters = append(clusters, envoyload.ClusterNames(c.Spec.Resources)...)
		}
	}
	got := r.loadAll(ctx, load, clusters)
	for i, c := range load {
		retry = retry || got[i].Outcome == envoyjudge.TimedOut || got[i].Outcome == envoyjudge.Unjudged
		verdicts[c.Name] = verdictOf(got[i], ir.Configs[c.Name].Content)
	}
	loaded := true
	for _, v := range verdicts {
		loaded = loaded && v.Loaded()
	}
	if loaded {
		// Envoy loaded it all (or there was nothing to load): the verdicts
		// change nothing of the translation (a second one took 7 to 10 ms of
		// a push at 1000 proxies, docs/benchmarks.md).
		return ir, retry
	}
	in.Envoy = verdicts
	if w.gateway != nil && verdicts[w.gateway.out.Config.Name].Refused != "" {
		// Envoy refused the Gateway's content: judge it again without the
		// routes that are refused alone.
		again, routesRetry := r.isolateRoutes(ctx, w, in, unavailable)
		retry = retry || routesRetry
		if again {
			in.Configs = w.current
			ir, moreRetry := r.judge(ctx, w, in, translate.Translate(in))
			return ir, retry || moreRetry
		}
	}
	return translate.Translate(in), retry
}

// loadAll has the judge load each of configs, with stand-ins of clusters,
// as many at once as it runs Envoys: each gets its turn as soon as another
// ends, and no load waits out its timeout in line.
func (r *Reconciler) loadAll(ctx context.Context, configs []translate.Config, clusters []string) []envoyjudge.Verdict {
	got := make([]envoyjudge.Verdict, len(configs))
	next := make(chan int, len(configs))
	for i := range configs {
		next <- i
	}
	close(next)
	workers := 0
	if len(configs) > 0 { // and so r.Envoy has an Envoy
		workers = min(r.Envoy.Concurrency(), len(configs))
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				got[i] = envoyjudge.Verdict{Outcome: envoyjudge.Unjudged}
				if res, err := envoyload.FromSpec(configs[i].Spec.Resources); err != nil {
					got[i].Message = err.Error()
				} else {
					got[i] = r.Envoy.Judge(ctx, res.WithClusters(clusters))
				}
			}
		})
	}
	wg.Wait()
	return got
}

// judgeRetry is how long the leader waits before it judges again content
// that Envoy did not judge for a reason that may pass (judge).
const judgeRetry = 10 * time.Second

// verdictOf is the Judge's verdict v of content, as translation reads it.
func verdictOf(v envoyjudge.Verdict, content string) translate.EnvoyVerdict {
	out := translate.EnvoyVerdict{Content: content}
	switch {
	case v.Refuses():
		out.Refused = v.Message
	case v.Outcome == envoyjudge.Unjudged:
		out.Unjudged = v.Message
	}
	return out
}
