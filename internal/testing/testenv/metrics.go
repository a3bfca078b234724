package testenv

import (
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// ReconcileTotal returns how many reconciles the named controller has finished
// in this process, whatever their result, from controller-runtime's
// controller_runtime_reconcile_total metric.
func ReconcileTotal(controller string) float64 {
	return counter("controller_runtime_reconcile_total", controller)
}

// ReconcileErrors returns how many reconciles of the named controller
// returned an error in this process.
func ReconcileErrors(controller string) float64 {
	return counter("controller_runtime_reconcile_errors_total", controller)
}

// counter sums the named counter's series of one controller.
func counter(name, controller string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return -1
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
