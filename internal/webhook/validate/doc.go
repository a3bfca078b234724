// Package validate is the operator's validating admission webhook for
// EnvoyConfigs: it refuses, at kubectl apply or delete, a change that would
// leave the EnvoyConfig's fleet worse.
//
// It judges the fleet (the namespace's EnvoyConfigs with the same envoyRef)
// as it would be after the change, for CREATE, UPDATE and DELETE, with the
// translation the controller uses (translate.Admit), and refuses:
//
//   - resources that do not decode strictly into Envoy's v3 protos, or that
//     Envoy's validation rules refuse;
//   - secret material written inline: private keys belong in Secrets, named
//     in spec.tlsSecrets;
//   - content that the operator's content policy refuses (translate.Policy):
//     files, environment variables, configuration from elsewhere, and
//     destinations beyond what the author may reach;
//   - references (to route configurations, clusters and SDS secrets) that
//     the change would leave leading nowhere, its own or those of another
//     EnvoyConfig of the fleet.
//
// Once the rules admit a change, a real Envoy loads the changed
// EnvoyConfig's resources, alone (envoyjudge.Judge, `envoy --mode
// validate`): what Envoy refuses, or does not load within
// --envoy-validation-timeout, is refused with Envoy's words. Without an
// Envoy the change is admitted on the rules alone, with an admission
// warning that says so.
//
// The message names the EnvoyConfig, the resource and the field
// (translate.Refusal), or gives Envoy's words. It admits an update of an EnvoyConfig being deleted,
// whose content is served no more, so that its finalizers can go, and any
// delete in a namespace being deleted, in whatever order the namespace
// controller deletes them.
//
// It trusts nothing an EnvoyConfig holds; the fleet's other EnvoyConfigs
// are read from the manager's cache, and the controller checks again, for
// objects that got in another way. The generated configuration sends no
// EnvoyConfig of kube-system or of the operator's own namespace.
package validate
