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
//     in; which revision is served, and the new history, out.
//   - server: the runtime. Each replica's ADS server, its limits, the
//     proxies' identity, the tracker of what they accepted, health checks,
//     metrics, and the replica's report of its proxies.
//   - debug: what each replica's debug endpoint answers, as kubectl envoy
//     reads it; debug/endpoint serves it.
//
// authority, the xDS certificate authority, stands aside: the server speaks
// mutual TLS with its certificates. xdstest holds test support: real ADS
// clients, proxies and certificates.
package xds
