package v1

// The condition types of an Envoy, and the reasons of each. Every
// condition's observedGeneration is the spec's generation it describes.
const (
	// EnvoyConditionAvailable is True when the fleet's Deployment has as
	// many available proxies as it should run.
	EnvoyConditionAvailable = "Available"
	// EnvoyConditionProgressing is True while the Deployment rolls out the
	// current spec, False once it is rolled out, or when a problem stops the
	// Deployment from being created (the reason is then Degraded's).
	EnvoyConditionProgressing = "Progressing"
	// EnvoyConditionDegraded is True when something stops the operator from
	// making the spec true; its reason and message say what. A Warning event
	// with the same reason is recorded when it becomes True or changes its
	// reason.
	EnvoyConditionDegraded = "Degraded"

	// EnvoyReasonMinimumReplicasAvailable (Available True): enough proxies
	// are available.
	EnvoyReasonMinimumReplicasAvailable = "MinimumReplicasAvailable"
	// EnvoyReasonMinimumReplicasUnavailable (Available False): fewer
	// proxies than wanted are available.
	EnvoyReasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	// EnvoyReasonDeploymentMissing (Available False, Progressing True): the
	// Deployment has not been created yet.
	EnvoyReasonDeploymentMissing = "DeploymentMissing"
	// EnvoyReasonRollingOut (Progressing True): the Deployment is updating
	// its proxies to the current spec.
	EnvoyReasonRollingOut = "RollingOut"
	// EnvoyReasonRolledOut (Progressing False): every proxy runs the current
	// spec.
	EnvoyReasonRolledOut = "RolledOut"
	// EnvoyReasonAsExpected (Degraded False): nothing is wrong.
	EnvoyReasonAsExpected = "AsExpected"
	// EnvoyReasonErrResourceExists (Degraded True): a child's name is taken
	// by an object the Envoy does not control. The operator never takes it
	// over, and looks again every 30 seconds.
	EnvoyReasonErrResourceExists = "ErrResourceExists"
	// EnvoyReasonInvalidSpec (Degraded True): the spec cannot be turned into
	// children; admission should have refused it.
	EnvoyReasonInvalidSpec = "InvalidSpec"
	// EnvoyReasonNoCertificateAuthority (Degraded True): the fleet's client
	// certificate cannot be issued, because the xDS CA is not there yet or
	// cannot be used.
	EnvoyReasonNoCertificateAuthority = "NoCertificateAuthority"
	// EnvoyReasonReconcileError (Degraded True): a write failed for a reason
	// the API server did not name. A write the API server refused carries
	// its reason instead, a metav1.StatusReason such as Forbidden or
	// Invalid.
	EnvoyReasonReconcileError = "ReconcileError"
)

// The reasons of the events recorded on an Envoy, besides the Warning event
// of Degraded.
const (
	// EnvoyEventCreated, EnvoyEventUpdated and EnvoyEventDeleted (Normal)
	// report the children a reconcile wrote: one event per verb and
	// reconcile. An Envoy's first children have no EnvoyEventCreated; its
	// status tells of them.
	EnvoyEventCreated = "Created"
	EnvoyEventUpdated = "Updated"
	EnvoyEventDeleted = "Deleted"
	// EnvoyEventRolledBack (Warning): every connected proxy rejected the
	// fleet's newest configuration, and the newest version they all
	// accepted is served again. Recorded once, on the fleet's Envoy (on its
	// first EnvoyConfig when the Envoy does not exist).
	EnvoyEventRolledBack = "RolledBack"
	// EnvoyEventRejected (Warning): every connected proxy rejected the
	// fleet's newest configuration, and none accepted an earlier one to go
	// back to. Recorded as EnvoyEventRolledBack is.
	EnvoyEventRejected = "Rejected"
	// EnvoyEventRolloutStarted, EnvoyEventRolloutPromoted,
	// EnvoyEventRolloutCompleted and EnvoyEventRolloutSuperseded (Normal),
	// and EnvoyEventRolloutAborted (Warning), tell how a change of the
	// fleet's configuration rolls out across its proxies
	// (spec.configRollout): served to a step's proxies, to the next step's,
	// to every proxy, cut short by a newer change, or sent back to the
	// previous configuration because a proxy rejected it. Recorded as
	// EnvoyEventRolledBack is.
	EnvoyEventRolloutStarted    = "RolloutStarted"
	EnvoyEventRolloutPromoted   = "RolloutPromoted"
	EnvoyEventRolloutCompleted  = "RolloutCompleted"
	EnvoyEventRolloutSuperseded = "RolloutSuperseded"
	EnvoyEventRolloutAborted    = "RolloutAborted"
)

// The condition types of an EnvoyConfig, and the reasons of each. Every
// condition's observedGeneration is the spec's generation it describes.
const (
	// EnvoyConfigConditionAccepted is True when every resource of the
	// EnvoyConfig is valid and its references exist.
	EnvoyConfigConditionAccepted = "Accepted"
	// EnvoyConfigConditionPublished is True when the EnvoyConfig's current
	// content is served to its fleet.
	EnvoyConfigConditionPublished = "Published"
	// EnvoyConfigConditionDegraded is True when something keeps the
	// EnvoyConfig from being served as it is, or from being accepted by the
	// proxies; its reason and message say what. A Warning event with the
	// same reason is recorded when it becomes True or changes its reason.
	EnvoyConfigConditionDegraded = "Degraded"

	// EnvoyConfigReasonValid (Accepted True): every resource is valid and its
	// references exist.
	EnvoyConfigReasonValid = "Valid"
	// EnvoyConfigReasonInvalidResources (Accepted False): a resource is not
	// valid; the message names it. None of the EnvoyConfig is served.
	EnvoyConfigReasonInvalidResources = "InvalidResources"
	// EnvoyConfigReasonReferencesMissing (Accepted False, or Degraded True):
	// a resource names one that does not exist in the fleet. Accepted is
	// False when the change is not served for it; Degraded is True when the
	// fleet keeps serving the version in which the references exist.
	EnvoyConfigReasonReferencesMissing = "ReferencesMissing"
	// EnvoyConfigReasonHeld (Accepted False): the change would leave
	// references of the fleet leading nowhere, so the fleet keeps its
	// published revision.
	EnvoyConfigReasonHeld = "Held"
	// EnvoyConfigReasonWithheld (Accepted False, Degraded True): every proxy
	// rejected a revision with this EnvoyConfig's current content, and the
	// rejection was attributed to its change (Envoy's message names the
	// proxy and what it refused). The change is withheld, and the fleet's
	// other EnvoyConfigs are served, until its content changes again.
	EnvoyConfigReasonWithheld = "Withheld"
	// EnvoyConfigReasonPolicyViolation (Accepted False, Degraded True): the
	// EnvoyConfig holds content that the content policy refuses: a file or
	// environment variable of the proxy, configuration from another server,
	// or a destination beyond what its author may reach. Admission refuses
	// it; one that got past admission is not served, none of it.
	EnvoyConfigReasonPolicyViolation = "PolicyViolation"
	// EnvoyConfigReasonRefusedByEnvoy (Accepted False, Degraded True): a
	// real Envoy refused to load the EnvoyConfig's content, or did not
	// load it in time; the message gives Envoy's words. Admission refuses
	// it; content that got past admission is not served, its published
	// content is instead.
	EnvoyConfigReasonRefusedByEnvoy = "RefusedByEnvoy"
	// EnvoyConfigReasonPublished (Published True): the current content is
	// served to the fleet; the message names the version.
	EnvoyConfigReasonPublished = "Published"
	// EnvoyConfigReasonNotPublished (Published False): the current content is
	// not served; the message says what the fleet keeps.
	EnvoyConfigReasonNotPublished = "NotPublished"
	// EnvoyConfigReasonRollingOut (Published True): the current content is
	// served to the proxies of a rollout's step (spec.configRollout of the
	// Envoy), the others keep the previous version; the message names the
	// step and why it waits.
	EnvoyConfigReasonRollingOut = "RollingOut"
	// EnvoyConfigReasonRolloutAborted (Published False, Degraded True): a
	// proxy rejected the current content during its rollout, and every
	// proxy is served the previous version until the content changes; the
	// message names the proxy and its error.
	EnvoyConfigReasonRolloutAborted = "RolloutAborted"
	// EnvoyConfigReasonRolledBack (Published False, Degraded True): every
	// proxy rejected the fleet's newest version, and the newest version they
	// all accepted is served again.
	EnvoyConfigReasonRolledBack = "RolledBack"
	// EnvoyConfigReasonRejected (Published False, Degraded True): every
	// proxy rejected the served version, and none accepted an earlier one to
	// go back to.
	EnvoyConfigReasonRejected = "Rejected"
	// EnvoyConfigReasonPublishFailed (Published False): the fleet's revision
	// could not be recorded. Degraded is then True with the API server's
	// reason for refusing the write (a metav1.StatusReason such as
	// Forbidden), EnvoyConfigReasonErrResourceExists, or
	// EnvoyConfigReasonReconcileError.
	EnvoyConfigReasonPublishFailed = "PublishFailed"
	// EnvoyConfigReasonErrResourceExists (Degraded True): the name of the
	// ConfigMap that records the fleet's revisions is taken by one the
	// operator does not control.
	EnvoyConfigReasonErrResourceExists = "ErrResourceExists"
	// EnvoyConfigReasonReconcileError (Degraded True): recording the fleet's
	// revision failed for a reason the API server did not name.
	EnvoyConfigReasonReconcileError = "ReconcileError"
	// EnvoyConfigReasonHistoryUnusable (Degraded True): the ConfigMap that
	// records the fleet's revisions did not pass the operator's checks (its
	// content was damaged, or changed by hand), so the leader wrote the
	// history afresh, without the revisions it held: a rollback has nothing
	// earlier to go back to. Reported once, with its Warning event, by the
	// reconcile that found it; the next one reads the history written afresh.
	EnvoyConfigReasonHistoryUnusable = "HistoryUnusable"
	// EnvoyConfigReasonNacked (Degraded True): some of the fleet's proxies
	// rejected the served version; the message gives the last rejection.
	EnvoyConfigReasonNacked = "Nacked"
	// EnvoyConfigReasonNameClash (Degraded True): a resource has the name of
	// another EnvoyConfig's resource of the same fleet, or of the fleet's
	// Gateway's; the older EnvoyConfig's resource is served, and a Gateway's
	// always.
	EnvoyConfigReasonNameClash = "NameClash"
	// EnvoyConfigReasonSecretUnavailable (Degraded True): a Secret that
	// spec.tlsSecrets names is missing, not labelled for the control plane,
	// not of type kubernetes.io/tls or without a PEM certificate and key, so
	// its SDS secret is not served. Like endpoints, Secrets are live: the
	// configuration is published all the same, and the proxies wait for the
	// secret (or keep the one they had).
	EnvoyConfigReasonSecretUnavailable = "SecretUnavailable"
	// EnvoyConfigReasonNoEndpointPort (Degraded True): a serviceEndpoints
	// port that the Service's EndpointSlices do not have, so the cluster gets
	// no endpoints.
	EnvoyConfigReasonNoEndpointPort = "NoEndpointPort"
	// EnvoyConfigReasonInlinePrivateKey (Degraded True): the EnvoyConfig
	// holds secret material inline, which admission now refuses. It is
	// served all the same, so that an upgrade takes no certificate away; it
	// should move to spec.tlsSecrets.
	EnvoyConfigReasonInlinePrivateKey = "InlinePrivateKey"
	// EnvoyConfigReasonEnvoyNotFound (Degraded True): the Envoy that
	// spec.envoyRef names does not exist in the namespace; the configuration
	// is served to proxies of that fleet identity all the same.
	EnvoyConfigReasonEnvoyNotFound = "EnvoyNotFound"
	// EnvoyConfigReasonAsExpected (Degraded False): nothing is wrong.
	EnvoyConfigReasonAsExpected = "AsExpected"
)

// The reasons of the events recorded on an EnvoyConfig, besides the Warning
// event of Degraded: when its fleet's Envoy does not exist, the fleet's
// events are recorded on its first EnvoyConfig.
const (
	// EnvoyConfigEventRolledBack (Warning): as EnvoyEventRolledBack.
	EnvoyConfigEventRolledBack = EnvoyEventRolledBack
	// EnvoyConfigEventRejected (Warning): as EnvoyEventRejected.
	EnvoyConfigEventRejected = EnvoyEventRejected
	// EnvoyConfigEventWithheld (Warning): the EnvoyConfig's change is
	// withheld (EnvoyConfigReasonWithheld); the note names the proxy that
	// rejected it and gives Envoy's message.
	EnvoyConfigEventWithheld = EnvoyConfigReasonWithheld
)
