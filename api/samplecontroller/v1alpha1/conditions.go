package v1alpha1

// The condition types of a Foo, and the reasons of each. Every condition's
// observedGeneration is the spec's generation it describes.
const (
	// FooConditionAvailable is True when the Foo's Deployment has as many
	// available replicas as spec.replicas.
	FooConditionAvailable = "Available"
	// FooConditionProgressing is True while the Deployment rolls out the
	// current spec, False once it is rolled out, or when a problem stops the
	// Deployment from being created (the reason is then Degraded's).
	FooConditionProgressing = "Progressing"
	// FooConditionDegraded is True when something stops the operator from
	// making the spec true; its reason and message say what. A Warning event
	// with the same reason is recorded when it becomes True or changes its
	// reason.
	FooConditionDegraded = "Degraded"

	// FooReasonMinimumReplicasAvailable (Available True): enough replicas are
	// available.
	FooReasonMinimumReplicasAvailable = "MinimumReplicasAvailable"
	// FooReasonMinimumReplicasUnavailable (Available False): fewer replicas
	// than wanted are available.
	FooReasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	// FooReasonDeploymentMissing (Available False, Progressing True): the
	// Deployment has not been created yet.
	FooReasonDeploymentMissing = "DeploymentMissing"
	// FooReasonRollingOut (Progressing True): the Deployment is updating its
	// replicas to the current spec.
	FooReasonRollingOut = "RollingOut"
	// FooReasonRolledOut (Progressing False): every replica runs the current
	// spec.
	FooReasonRolledOut = "RolledOut"
	// FooReasonAsExpected (Degraded False): nothing is wrong.
	FooReasonAsExpected = "AsExpected"
	// FooReasonErrResourceExists (Degraded True): spec.deploymentName is
	// taken by a Deployment the Foo does not control. The operator never
	// takes it over, and looks again every 30 seconds.
	FooReasonErrResourceExists = "ErrResourceExists"
	// FooReasonReconcileError (Degraded True): a write failed for a reason
	// the API server did not name. A write the API server refused carries
	// its reason instead, a metav1.StatusReason such as Forbidden or
	// Invalid.
	FooReasonReconcileError = "ReconcileError"
)

// The reasons of the Normal events recorded on a Foo for the children a
// reconcile wrote: one event per verb and reconcile. A Foo's first children
// have no FooEventCreated; its status tells of them.
const (
	FooEventCreated = "Created"
	FooEventUpdated = "Updated"
	FooEventDeleted = "Deleted"
)
