package vocabulary

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
)

func TestOf(t *testing.T) {
	envoy, err := Of(&examplev1.Envoy{})
	if err != nil {
		t.Fatal(err)
	}
	config, err := Of(&examplev1.EnvoyConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// Each kind has its own names, although one package declares both.
	if !envoy.Types["Available"] || envoy.Types["Accepted"] || !config.Types["Accepted"] || config.Types["Available"] {
		t.Errorf("types: Envoy %v, EnvoyConfig %v", envoy.Types, config.Types)
	}
	// A constant given as another is read too.
	if !config.Events["RolledBack"] || !envoy.Events["Created"] || config.Events["Created"] {
		t.Errorf("events: Envoy %v, EnvoyConfig %v", envoy.Events, config.Events)
	}
	if _, err := Of(&metav1.Status{}); err == nil {
		t.Error("a type outside the operator's API has a vocabulary")
	}
}

func TestCheck(t *testing.T) {
	envoy, err := Of(&examplev1.Envoy{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		conds []metav1.Condition
		event string
		wrong int
	}{
		{"exported", []metav1.Condition{{Type: examplev1.EnvoyConditionDegraded, Reason: examplev1.EnvoyReasonNoCertificateAuthority}}, examplev1.EnvoyEventCreated, 0},
		{"the API server's reason", []metav1.Condition{{Type: examplev1.EnvoyConditionDegraded, Reason: string(metav1.StatusReasonForbidden)}}, string(metav1.StatusReasonForbidden), 0},
		{"a Degraded reason as a Warning event", nil, examplev1.EnvoyReasonNoCertificateAuthority, 0},
		{"a type not exported", []metav1.Condition{{Type: "Accepted", Reason: examplev1.EnvoyReasonAsExpected}}, "", 1},
		{"a reason not exported", []metav1.Condition{{Type: examplev1.EnvoyConditionDegraded, Reason: "Valid"}}, "", 1},
		{"an event not exported", nil, "Started", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wrong := envoy.Conditions(tt.conds)
			if tt.event != "" {
				wrong = append(wrong, envoy.Event(tt.event)...)
			}
			if len(wrong) != tt.wrong {
				t.Errorf("wrong = %v, want %d", wrong, tt.wrong)
			}
		})
	}
}
