package gateway

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
)

// APIVersion is the Gateway API release the operator is built against, whose
// CRDs it installs (config/crd/gateway-api).
const APIVersion = "v1.6.3"

// ClassStatus is the status a GatewayClass of this operator's should have:
// Accepted unless its parametersRef cannot be used (problem says why),
// SupportedVersion, and the features its Gateways support.
func ClassStatus(class *gwv1.GatewayClass, problem string) gwv1.GatewayClassStatus {
	st := gwv1.GatewayClassStatus{Conditions: append([]metav1.Condition(nil), class.Status.Conditions...)}
	accepted := metav1.Condition{Type: string(gwv1.GatewayClassConditionStatusAccepted), Status: metav1.ConditionTrue,
		Reason: string(gwv1.GatewayClassReasonAccepted), Message: "its Gateways are served by fleets of real Envoys", ObservedGeneration: class.Generation}
	if problem != "" {
		accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, string(gwv1.GatewayClassReasonInvalidParameters), problem
	}
	meta.SetStatusCondition(&st.Conditions, accepted)
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: string(gwv1.GatewayClassConditionStatusSupportedVersion),
		Status: metav1.ConditionTrue, Reason: string(gwv1.GatewayClassReasonSupportedVersion),
		Message: "built for Gateway API " + APIVersion, ObservedGeneration: class.Generation})
	for _, f := range gateway.SupportedFeatures {
		st.SupportedFeatures = append(st.SupportedFeatures, gwv1.SupportedFeature{Name: f})
	}
	return st
}
