package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/pkg/generated/clientset/versioned"
)

// The rollout commands act through the API server, with the caller's own
// rights: status reads the fleet's EnvoyConfigs, whose status the operator
// writes, and, where the caller may read it, the fleet's recorded history
// in the operator's namespace, for the verdicts of the steps judged by
// their proxies' figures (spec.configRollout.analysis); promote and abort annotate the fleet's Envoy with an order the
// operator carries out (examplev1.RolloutPromoteAnnotation and
// RolloutAbortAnnotation), so that whoever may edit the Envoy may give it,
// and nobody else.
func (o *options) rolloutCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "See, promote or abort the rollout of a fleet's configuration (the Envoy's spec.configRollout)",
	}
	cmd.AddCommand(
		&cobra.Command{
			Use:   "status <fleet>",
			Short: "Where the fleet's configuration rolls out: the version, the step, the proxies served it, and why it waits",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, configs, err := o.fleetConfigs(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				recorded, why := o.recordedRollout(cmd.Context(), c, args[0])
				if err := printRollout(o.streams.Out, args[0], configs); err != nil {
					return err
				}
				return printVerdicts(o.streams.Out, currentRollout(configs), recorded, why)
			},
		},
		&cobra.Command{
			Use:   "promote <fleet>",
			Short: "Promote the rollout's current step now, without waiting for its bake time or judging its proxies' figures; its proxies must still accept the version",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return o.order(cmd.Context(), args[0], true)
			},
		},
		&cobra.Command{
			Use:   "abort <fleet>",
			Short: "Abort the rollout: every proxy is served the previous version until the content changes",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return o.order(cmd.Context(), args[0], false)
			},
		},
	)
	return cmd
}

// fleetConfigs returns the typed client and the EnvoyConfigs of fleet, in
// the namespace of the command; the fleet's Envoy must exist.
func (o *options) fleetConfigs(ctx context.Context, fleet string) (versioned.Interface, []examplev1.EnvoyConfig, error) {
	ns, err := o.namespace()
	if err != nil {
		return nil, nil, err
	}
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, nil, err
	}
	c, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if _, err := c.ExampleV1().Envoys(ns).Get(ctx, fleet, metav1.GetOptions{}); err != nil {
		return nil, nil, err
	}
	list, err := c.ExampleV1().EnvoyConfigs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	var out []examplev1.EnvoyConfig
	for _, ec := range list.Items {
		if ec.Spec.EnvoyRef == fleet {
			out = append(out, ec)
		}
	}
	return c, out, nil
}

// currentRollout returns the rollout the fleet's EnvoyConfigs report, the
// one of the most recent status when they differ (one not written yet).
func currentRollout(configs []examplev1.EnvoyConfig) *examplev1.ConfigRolloutStatus {
	var best *examplev1.ConfigRolloutStatus
	var gen int64 = -1
	for i := range configs {
		if r := configs[i].Status.Rollout; r != nil && configs[i].Status.ObservedGeneration > gen {
			best, gen = r, configs[i].Status.ObservedGeneration
		}
	}
	return best
}

// rolloutOrder returns the annotation, and its value, that orders the
// rollout the fleet's EnvoyConfigs report to be promoted past its current
// step (promote) or aborted.
func rolloutOrder(fleet string, configs []examplev1.EnvoyConfig, promote bool) (string, string, error) {
	r := currentRollout(configs)
	if r == nil || r.Phase != "Progressing" {
		return "", "", fmt.Errorf("fleet %s has no rollout under way", fleet)
	}
	if promote {
		return examplev1.RolloutPromoteAnnotation, fmt.Sprintf("%s/%d", r.Version, r.Step), nil
	}
	return examplev1.RolloutAbortAnnotation, r.Version, nil
}

// order annotates the fleet's Envoy with an order to promote or abort its rollout.
func (o *options) order(ctx context.Context, fleet string, promote bool) error {
	c, configs, err := o.fleetConfigs(ctx, fleet)
	if err != nil {
		return err
	}
	key, value, err := rolloutOrder(fleet, configs, promote)
	if err != nil {
		return err
	}
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if _, err := c.ExampleV1().Envoys(ns).Patch(ctx, fleet, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	what := "promote"
	if !promote {
		what = "abort"
	}
	fmt.Fprintf(o.streams.Out, "envoy.example.com/%s: ordered to %s the rollout (%s=%s)\n", fleet, what, key, value)
	return nil
}

// recordedRollout reads the rollout recorded in the history of fleet, in
// the command's namespace, when its Envoy judges its steps by their
// figures (spec.configRollout.analysis); nil, and why, when it cannot be
// read (the caller may not read the operator's namespace), and nil alone
// when the fleet has no analysis or the history records no rollout.
func (o *options) recordedRollout(ctx context.Context, c versioned.Interface, name string) (*publish.Rollout, string) {
	ns, err := o.namespace()
	if err != nil {
		return nil, err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	e, err := c.ExampleV1().Envoys(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err != nil:
		return nil, err.Error()
	case e.Spec.ConfigRollout == nil || e.Spec.ConfigRollout.Analysis == nil:
		return nil, ""
	}
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, err.Error()
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err.Error()
	}
	id := fleet.ID{Namespace: ns, Name: name}
	cm, err := kc.CoreV1().ConfigMaps(o.operatorNamespace).Get(ctx, history.Name(id), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Sprintf("the fleet's history in namespace %s cannot be read: %v", o.operatorNamespace, err)
	}
	h, err := history.Read(cm, o.operatorNamespace, id)
	if err != nil {
		return nil, fmt.Sprintf("the fleet's history is not usable: %v", err)
	}
	return h.Rollout, ""
}

// printVerdicts prints the verdicts of the steps of the rollout r (the
// EnvoyConfigs' status) that its proxies' figures passed or aborted, as
// recorded (nil, and why, when they cannot be read); with no rollout under
// way, those of the last rollout when it was aborted (the fleet serves the
// revision without the withheld change, which has no rollout of its own);
// nothing when there is none, or none judged.
func printVerdicts(w io.Writer, r *examplev1.ConfigRolloutStatus, recorded *publish.Rollout, why string) error {
	switch {
	case r == nil && recorded != nil && recorded.Phase == publish.RolloutAborted && len(recorded.Verdicts) > 0:
		fmt.Fprintf(w, "\nthe last rollout, of version %s, was aborted at step %d\n", recorded.Revision, recorded.Step+1)
		r = &examplev1.ConfigRolloutStatus{Version: recorded.Revision}
	case r == nil:
		return nil
	case recorded == nil && why != "":
		_, err := fmt.Fprintf(w, "\nstep verdicts not shown: %s\n", why)
		return err
	case recorded == nil || recorded.Revision != r.Version || len(recorded.Verdicts) == 0:
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tVERDICT\tSTEP PROXIES\tBASELINE\tFINDING")
	for _, v := range recorded.Verdicts {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", v.Step+1, v.Outcome, v.Proxies, v.Baseline, orDash(v.Finding))
	}
	return tw.Flush()
}

// printRollout prints where the fleet's rollout stands.
func printRollout(w io.Writer, fleet string, configs []examplev1.EnvoyConfig) error {
	r := currentRollout(configs)
	if r == nil {
		version := ""
		for _, c := range configs {
			if version == "" {
				version = c.Status.PublishedVersion
			}
		}
		if version == "" {
			_, err := fmt.Fprintf(w, "fleet %s: nothing published yet\n", fleet)
			return err
		}
		_, err := fmt.Fprintf(w, "fleet %s: no rollout under way; version %s is served to every proxy\n", fleet, version)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FLEET\tVERSION\tPREVIOUS\tPHASE\tSTEP\tSERVED\tMESSAGE")
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d/%d\t%s\n", fleet, r.Version, r.PreviousVersion, r.Phase, r.Step, r.ServedProxies, r.ConnectedProxies, orDash(r.Message))
	return tw.Flush()
}
