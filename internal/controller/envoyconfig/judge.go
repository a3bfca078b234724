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
// serve and that no revision of the fleet's history holds, and translates
// in again with Envoy's verdicts (translate.Input.Envoy), so that content
// Envoy refuses is never recorded. Content a recorded revision holds was
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
	// As many loads at once as the judge runs Envoys: each gets its turn
	// as soon as another ends, and no load waits out its timeout in line.
	got := make([]envoyjudge.Verdict, len(load))
	next := make(chan int, len(load))
	for i := range load {
		next <- i
	}
	close(next)
	// The fleet's clusters, which each is loaded beside as stand-ins
	// (envoyload.Resources.WithClusters).
	var clusters []string
	if len(load) > 0 {
		for _, c := range w.current {
			clusters = append(clusters, envoyload.ClusterNames(c.Spec.Resources)...)
		}
	}
	workers := 0
	if len(load) > 0 { // and so r.Envoy has an Envoy
		workers = min(r.Envoy.Concurrency(), len(load))
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				got[i] = envoyjudge.Verdict{Outcome: envoyjudge.Unjudged}
				if res, err := envoyload.FromSpec(load[i].Spec.Resources); err != nil {
					got[i].Message = err.Error()
				} else {
					got[i] = r.Envoy.Judge(ctx, res.WithClusters(clusters))
				}
			}
		})
	}
	wg.Wait()
	for i, c := range load {
		retry = retry || got[i].Outcome == envoyjudge.TimedOut || got[i].Outcome == envoyjudge.Unjudged
		verdicts[c.Name] = verdictOf(got[i], ir.Configs[c.Name].Content)
	}
	if len(verdicts) == 0 {
		return ir, retry
	}
	in.Envoy = verdicts
	return translate.Translate(in), retry
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
