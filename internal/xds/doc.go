// Package xds maps the operator's built-in xDS control plane. It holds no
// code: each stage has a room of its own below it, and each stage imports
// only those before it (tested).
//
//   - resource: the vocabulary, pure. The kinds of Envoy resources, how
//     each is decoded and checked as Envoy would load it, content versions.
//   - translate: pure. A fleet's EnvoyConfigs, EndpointSlices and Secrets
//     in, the fleet's IR out: what is served, and what is wrong with each
//     EnvoyConfig. Admission and the controller decide with it.
//   - publish: pure. The IR, the fleet's history and its proxies' answers
//     in; which revision is served, and the new history, out. It holds the
//     history's type, the rejections recorded in the EnvoyConfigs' status,
//     and the state machine of a progressive rollout (Roll).
//   - history: the format the histories are recorded in, pure. The
//     ConfigMap that holds a fleet's history in the operator's namespace,
//     the checks of what is read back, the previous release's layout;
//     history/store holds the Store that alone reads and writes them.
//   - report: the format of each replica's report of its proxies' answers,
//     in shards, which the leader adds up for publish.
//   - analysis: pure. A rollout step's proxies' figures against the
//     previous revision's proxies', the bake's time and a fleet's
//     thresholds in; pass, wait or abort, with the figures why, out.
//   - cache: what each fleet serves, encoded once, and what each stream
//     is sent and when, by the rules of the xDS protocol; the server's.
//   - server: the runtime. Each replica's ADS server, its limits, one
//     record per stream (the proxy's identity, what it was sent, what it
//     accepted), the tracker that counts them by fleet, health checks,
//     metrics, and the writer of the replica's report.
//   - stats: the runtime beside the server. The receiver of the figures a
//     fleet's proxies stream over Envoy's metrics service, served on the
//     server's port and checked as ADS is, kept per proxy within bounds,
//     for analysis; and the stats sink a bootstrap declares.
//   - debug: what each replica's debug endpoint answers, as kubectl envoy
//     reads it; debug/endpoint serves it.
//
// authority, the xDS certificate authority, stands aside: the server speaks
// mutual TLS with its certificates. xdstest holds test support: real ADS
// clients, proxies and certificates.
//
// # Words
//
// Each of these words means one thing throughout the rooms.
//
//   - revision: one state of a fleet's content, the content chosen of each
//     of its EnvoyConfigs (translate.IR.Revision, publish.Revision), as it
//     is recorded: no Secret's data, no inline secret, no endpoint.
//   - version: the name of a revision, a hash of its recorded content
//     (translate.VersionOf): the same content is the same version, on any
//     replica. The type versions a proxy is sent change with what is live
//     too; a revision's version does not.
//   - current: the revision most recently published, the history's
//     Current. The cache's publication of a fleet is of it, and the debug
//     endpoint's TypeStatus.Current is a type's version in it. It is not
//     always what a proxy is served: see served.
//   - previous: the revision a fleet served to all its proxies before the
//     current one, while the current one rolls out (Rollout.Previous,
//     cache.Previous): the proxies outside the rollout's steps are served
//     it, and every proxy once the rollout is aborted.
//   - served: what a proxy is sent. Rollout.Serves says which revision, by
//     proxy: the current one to every proxy when no rollout of it is under
//     way; during one, the current one to the proxies of its steps and the
//     previous one to the others; once it is aborted, the previous one to
//     all. An EnvoyConfig's content is served when the revision its
//     proxies are served takes it. Publishing a revision makes it current,
//     and an EnvoyConfig's published content is what the current revision
//     holds of it.
//   - live: served from the objects as they are now, never from a
//     revision: the endpoints of the Services that spec.serviceEndpoints
//     names, the Secrets that spec.tlsSecrets names, and inline secrets. A
//     change of them changes what proxies are sent, under the same version.
//     (kubectl envoy diff calls the EnvoyConfigs in the cluster live, as
//     against those of its files.)
//   - held: the current revision stays, whole, while newer content waits.
//     translate holds a fleet (IR.Held) when content it serves would have
//     references that lead nowhere; publish holds (Hold) the IR's content
//     when it is a revision every proxy rejected, until the content
//     changes. A report's write that waits is delayed, and a lock is
//     taken (cache.Occupy takes one, for tests), not held.
//   - recorded: written where a restarted or another replica reads it back:
//     the fleet's history (internal/xds/history), and the rejections that
//     outlive it in the EnvoyConfigs' status. What is served is decided
//     from what is recorded alone. translate.Config.Recorded is an
//     EnvoyConfig as a revision records it. The rooms do not say stored
//     for it: history/store holds the Store, which records.
//   - withheld: an EnvoyConfig's content that every proxy rejected, when
//     the rejection is attributed to its change (translate.Attribute). It
//     is recorded in the history (History.Withheld), and while the
//     EnvoyConfig's content is that, the fleet's revisions take its content
//     from before the change, and the other EnvoyConfigs' changes are
//     served.
//   - report: a replica's report of its proxies' answers, in shards
//     (internal/xds/report, written by the server's Reporter), which the
//     leader adds up for publish.
//   - world: only in state of the world, the xDS protocol beside delta.
//
// A few names are older than these words, and stay while code outside the
// rooms uses them: History.Staged and server.Staged are the previous
// revision, History.Served the current one, and store.Stored what is
// recorded of a fleet. translate says current of an EnvoyConfig's content
// as it is now (ChoiceCurrent), as against its published content; the
// resource decode cache, analysis and xdstest say held in its everyday
// sense.
package xds
