package v1alpha1

// The condition types of a PodSet, and the reasons of each, as a ReplicaSet
// reports them. Every condition's observedGeneration is the spec's generation
// it describes.
const (
	// PodSetConditionAvailable is True when as many pods are ready as
	// spec.replicas.
	PodSetConditionAvailable = "Available"
	// PodSetConditionReplicaFailure is True while pods cannot be created or
	// deleted; it is removed once a reconcile compared the pods with
	// spec.replicas and wrote what it had to. Its reasons are also those of
	// the Warning events of the failures.
	PodSetConditionReplicaFailure = "ReplicaFailure"
	// PodSetConditionDegraded is True while pods cannot be created or
	// deleted, with the API server's reason for refusing the write (a
	// metav1.StatusReason such as Forbidden for a quota or an admission, or
	// PodSetReasonReconcileError when the API server named none). A Warning
	// event with the same reason is recorded when it becomes True or changes
	// its reason.
	PodSetConditionDegraded = "Degraded"

	// PodSetReasonMinimumReplicasAvailable (Available True): enough pods are
	// ready.
	PodSetReasonMinimumReplicasAvailable = "MinimumReplicasAvailable"
	// PodSetReasonMinimumReplicasUnavailable (Available False): fewer pods
	// than wanted are ready.
	PodSetReasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	// PodSetReasonFailedCreate (ReplicaFailure True, and a Warning event):
	// creating a pod failed.
	PodSetReasonFailedCreate = "FailedCreate"
	// PodSetReasonFailedDelete (ReplicaFailure True, and a Warning event):
	// deleting a pod failed.
	PodSetReasonFailedDelete = "FailedDelete"
	// PodSetReasonAsExpected (Degraded False): nothing is wrong.
	PodSetReasonAsExpected = "AsExpected"
	// PodSetReasonReconcileError (Degraded True): a create or delete failed
	// for a reason the API server did not name.
	PodSetReasonReconcileError = "ReconcileError"
)

// The reasons of the Normal events recorded on a PodSet for the pods a
// reconcile created or deleted, as the ReplicaSet controller names them.
const (
	PodSetEventSuccessfulCreate = "SuccessfulCreate"
	PodSetEventSuccessfulDelete = "SuccessfulDelete"
)
