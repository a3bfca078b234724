// Package hostcmd is what the commands of hack/ that stand in for a
// cluster's parts on this host (hostfleet, standin) share: a clientset of
// the cluster, a run that an interrupt ends, and how they exit.
package hostcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
)

// Main runs run with a clientset of the cluster that --kubeconfig names,
// else KUBECONFIG (controller-runtime's flag and rules), until an interrupt
// or SIGTERM ends its context, and exits: with 1, printing name and the
// error, if it fails otherwise than by that end. Call it from main, after
// flag.Parse.
func Main(name string, run func(ctx context.Context, cs kubernetes.Interface) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := clientset(ctx, run)
	stop()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

func clientset(ctx context.Context, run func(ctx context.Context, cs kubernetes.Interface) error) error {
	cfg, err := config.GetConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return run(ctx, cs)
}
