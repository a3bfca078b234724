package v1

// The condition types of a FooBar, and the reasons of each. Every
// condition's observedGeneration is the spec's generation it describes.
const (
	// FooBarConditionComplete is True once the run of the current
	// generation ended. Its reason is the run's phase (FooBarReasonPending,
	// FooBarReasonRunning, FooBarReasonSucceeded, FooBarReasonFailed), or
	// FooBarReasonJobLost.
	FooBarConditionComplete = "Complete"
	// FooBarConditionDegraded is True when something stops the operator from
	// running the Job; its reason and message say what. A Warning event with
	// the same reason is recorded when it becomes True or changes its reason.
	FooBarConditionDegraded = "Degraded"

	// FooBarReasonPending (Complete False): the Job does not exist yet, or
	// has no running pod yet.
	FooBarReasonPending = "Pending"
	// FooBarReasonRunning (Complete False): the Job is running.
	FooBarReasonRunning = "Running"
	// FooBarReasonSucceeded (Complete True): the Job succeeded.
	FooBarReasonSucceeded = "Succeeded"
	// FooBarReasonFailed (Complete True): the Job failed.
	FooBarReasonFailed = "Failed"
	// FooBarReasonJobLost (Complete True, phase Failed): the Job disappeared
	// before its outcome was known. The command of that generation is not
	// run again; a new generation runs it.
	FooBarReasonJobLost = "JobLost"
	// FooBarReasonAsExpected (Degraded False): nothing is wrong.
	FooBarReasonAsExpected = "AsExpected"
	// FooBarReasonErrResourceExists (Degraded True): the Job's name is taken
	// by a Job the FooBar does not control. The operator never takes it
	// over, and looks again every 30 seconds.
	FooBarReasonErrResourceExists = "ErrResourceExists"
	// FooBarReasonReconcileError (Degraded True): a write failed for a reason
	// the API server did not name. A write the API server refused carries
	// its reason instead, a metav1.StatusReason such as Forbidden or
	// Invalid.
	FooBarReasonReconcileError = "ReconcileError"
)

// The reasons of the events recorded on a FooBar for its run.
const (
	// FooBarEventStarted (Normal): the run's Job was created. It is the
	// created event of the FooBar's children, so a FooBar has no Created
	// event.
	FooBarEventStarted = "Started"
	// FooBarEventSucceeded (Normal): the run ended, its Job succeeded.
	FooBarEventSucceeded = "Succeeded"
	// FooBarEventFailed (Warning): the run ended, its Job failed or was lost.
	FooBarEventFailed = "Failed"
	// FooBarEventUpdated and FooBarEventDeleted (Normal): a reconcile
	// updated or deleted the FooBar's Job.
	FooBarEventUpdated = "Updated"
	FooBarEventDeleted = "Deleted"
)
