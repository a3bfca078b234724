package v1alpha1

// The condition types of a Watcher, and the reasons of each. Every
// condition's observedGeneration is the spec's generation it describes.
const (
	// WatcherConditionReady is True when the Watcher's ConfigMap holds its
	// configuration, ready for the sidecars injected into its pods. When it
	// is False, its reason and message are Degraded's.
	WatcherConditionReady = "Ready"
	// WatcherConditionDegraded is True when something stops the operator from
	// writing the ConfigMap; its reason and message say what. A Warning event
	// with the same reason is recorded when it becomes True or changes its
	// reason.
	WatcherConditionDegraded = "Degraded"

	// WatcherReasonConfigMapReady (Ready True): the ConfigMap is written.
	WatcherReasonConfigMapReady = "ConfigMapReady"
	// WatcherReasonAsExpected (Degraded False): nothing is wrong.
	WatcherReasonAsExpected = "AsExpected"
	// WatcherReasonErrResourceExists (Degraded True, Ready False): the
	// ConfigMap's name is taken by one the Watcher does not control. The
	// operator never takes it over, looks again every 30 seconds, and the
	// sidecar injector leaves the Watcher's pods alone meanwhile.
	WatcherReasonErrResourceExists = "ErrResourceExists"
	// WatcherReasonReconcileError (Degraded True, Ready False): a write failed
	// for a reason the API server did not name. A write the API server
	// refused carries its reason instead, a metav1.StatusReason such as
	// Forbidden or Invalid.
	WatcherReasonReconcileError = "ReconcileError"
)

// The reasons of the Normal events recorded on a Watcher for the ConfigMap a
// reconcile wrote. A Watcher's first ConfigMap has no WatcherEventCreated;
// its status tells of it.
const (
	WatcherEventCreated = "Created"
	WatcherEventUpdated = "Updated"
	WatcherEventDeleted = "Deleted"
)
