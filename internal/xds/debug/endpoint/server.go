// Package endpoint is each replica's debug endpoint for the xDS control
// plane, the last stage: it shows what the replica's Server tracks and
// serves, in the terms of package debug. It is served over TLS, on the
// loopback interface by default (reached through the API server's port
// forwarding), and the API server decides who may read what: it
// authenticates every request (TokenReview, or the cluster's client CA) and
// authorizes it per fleet namespace (SubjectAccessReview), as an extension
// API server or the kubelet does.
//
// Its invariant: nothing is shown to a client the API server did not
// authenticate, nor of a namespace the client may not read. rows.go is
// pure; server.go is the shell.
package endpoint

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/version"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
)

// The API server authenticates and authorizes the endpoint's clients; the
// cluster's client CA is read from the ConfigMap the API server publishes
// for extension API servers.
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch

// Where the cluster's client CA is published.
const (
	ClientCANamespace = "kube-system"
	ClientCAConfigMap = "extension-apiserver-authentication"
	ClientCAKey       = "client-ca-file"
)

// What a client needs, in a fleet's namespace, to read its proxies or its configuration.
const (
	group           = "example.com"
	proxiesResource = "envoys"
	configResource  = "envoyconfigs"
)

// writeTimeout bounds the writing of one answer.
const writeTimeout = 30 * time.Second

// Source is what the endpoint shows: the replica's xDS server.
type Source interface {
	Tracker() *server.Tracker
	TypeVersion(fleet, typeURL string) string
	Resources(fleet string) map[string][]types.Resource
}

// Options configure a Server.
type Options struct {
	// BindAddress is host:port (port 0 picks one).
	BindAddress string
	// Replica names this replica in the answers.
	Replica string
	// Config reaches the API server, which reviews the clients.
	Config *rest.Config
	// Certificate is the server's certificate, from the xDS authority.
	Certificate func(context.Context) (*tls.Certificate, error)
	Source      Source
	// Histories reads the fleets' recorded histories, in Namespace (the
	// operator's): the manager's client, from the cache the controller
	// reads. Without it, the endpoint shows no history.
	Histories client.Reader
	Namespace string
	Log       logr.Logger
}

// Server serves the endpoint, on every replica.
type Server struct {
	o        Options
	authn    authenticator.Request
	authz    authorizer.Authorizer
	clientCA *dynamiccertificates.ConfigMapCAController
	ready    chan struct{}
	bound    net.Addr
}

// New returns a Server that delegates authentication and authorization to
// the API server of o.Config. Anonymous requests are refused.
func New(o Options) (*Server, error) {
	cs, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return nil, err
	}
	clientCA, err := dynamiccertificates.NewDynamicCAFromConfigMapController("xds-debug-client-ca",
		ClientCANamespace, ClientCAConfigMap, ClientCAKey, cs)
	if err != nil {
		return nil, err
	}
	backoff := &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                          &apiserver.AnonymousAuthConfig{Enabled: false},
		TokenAccessReviewClient:            cs.AuthenticationV1(),
		TokenAccessReviewTimeout:           10 * time.Second,
		WebhookRetryBackoff:                backoff,
		CacheTTL:                           10 * time.Second,
		ClientCertificateCAContentProvider: clientCA,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("the debug endpoint's authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: cs.AuthorizationV1(),
		AllowCacheTTL:             10 * time.Second,
		DenyCacheTTL:              5 * time.Second,
		WebhookRetryBackoff:       backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("the debug endpoint's authorizer: %w", err)
	}
	return &Server{o: o, authn: authn, authz: authz, clientCA: clientCA, ready: make(chan struct{})}, nil
}

// NeedLeaderElection is false: every replica has its own proxies.
func (s *Server) NeedLeaderElection() bool { return false }

// Addr waits until the server listens and returns its address.
func (s *Server) Addr(ctx context.Context) (net.Addr, error) {
	select {
	case <-s.ready:
		return s.bound, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Start serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	go s.clientCA.Run(ctx, 1)
	lis, err := net.Listen("tcp", s.o.BindAddress)
	if err != nil {
		return fmt.Errorf("debug endpoint: listening on %s: %w", s.o.BindAddress, err)
	}
	s.bound = lis.Addr()
	close(s.ready)
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		WriteTimeout:      writeTimeout,
		TLSConfig: &tls.Config{
			MinVersion: tls.VersionTLS13,
			GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
				return s.o.Certificate(hello.Context())
			},
			// Requested, not required: a client may send a bearer token
			// instead. The authenticator verifies the certificate against
			// the cluster's client CA.
			ClientAuth: tls.RequestClientCert,
		},
	}
	s.o.Log.Info("serving the xDS debug endpoint", "address", s.bound.String())
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(lis, "", "") }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Handler serves the endpoint's paths, each request authenticated first.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+debug.ProxiesPath, s.proxies)
	mux.HandleFunc("GET "+debug.ConfigPath, s.config)
	if s.o.Histories != nil {
		mux.HandleFunc("GET "+debug.HistoryPath, s.history)
	}
	mux.HandleFunc("GET "+debug.VersionPath, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, debug.VersionInfo{Replica: s.o.Replica, Version: version.Version(), Revision: version.Revision()})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		res, ok, err := s.authn.AuthenticateRequest(req)
		if err != nil || !ok {
			if err != nil {
				s.o.Log.V(1).Info("debug endpoint: authentication failed", "error", err.Error())
			}
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, req.WithContext(withUser(req.Context(), res.User)))
	})
}

type userKey struct{}

func withUser(ctx context.Context, u user.Info) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

func userOf(ctx context.Context) user.Info {
	u, _ := ctx.Value(userKey{}).(user.Info)
	return u
}

// allowed asks the API server whether the request's user may get resource
// (name, if set) in namespace.
func (s *Server) allowed(ctx context.Context, resource, namespace, name string) (bool, error) {
	d, _, err := s.authz.Authorize(ctx, authorizer.AttributesRecord{
		User: userOf(ctx), Verb: "get", Namespace: namespace, APIGroup: group, APIVersion: "v1",
		Resource: resource, Name: name, ResourceRequest: true,
	})
	return d == authorizer.DecisionAllow, err
}

// proxies lists the replica's proxies, of the fleets whose Envoy the user
// may get. As with kubectl get, a namespace (or a fleet) the user asked for
// and may not read is Forbidden; across every namespace, the fleets the user
// may not read are left out.
func (s *Server) proxies(w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	ns, name := req.URL.Query().Get("namespace"), req.URL.Query().Get("fleet")
	if name != "" && ns == "" {
		http.Error(w, "fleet needs namespace", http.StatusBadRequest)
		return
	}
	decided := map[string]bool{}
	if ns != "" {
		if !s.authorize(w, req, proxiesResource, ns, name) {
			return
		}
		if name != "" {
			decided[fleet.ID{Namespace: ns, Name: name}.String()] = true
		}
	}
	rows := Rows(s.o.Source.Tracker().Proxies(), s.o.Source.TypeVersion, s.o.Replica)
	out := make([]debug.ProxyRow, 0, len(rows))
	for _, r := range rows {
		id, err := fleet.Parse(r.Fleet)
		if err != nil || (ns != "" && id.Namespace != ns) || (name != "" && id.Name != name) {
			continue
		}
		ok, seen := decided[r.Fleet]
		if !seen {
			if ok, err = s.allowed(ctx, proxiesResource, id.Namespace, id.Name); err != nil {
				s.o.Log.Error(err, "debug endpoint: authorizing", "fleet", r.Fleet)
			}
			decided[r.Fleet] = ok
		}
		if ok {
			out = append(out, r)
		}
	}
	writeJSON(w, debug.ProxyList{Replica: s.o.Replica, Proxies: out})
}

// config dumps what a fleet is served, to a user who may get its EnvoyConfigs.
func (s *Server) config(w http.ResponseWriter, req *http.Request) {
	fleetID, only := req.URL.Query().Get("fleet"), req.URL.Query().Get("type")
	id, err := fleet.Parse(fleetID)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if only != "" {
		if _, err := resource.KindNamed(only); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	if !s.authorize(w, req, configResource, id.Namespace, "") {
		return
	}
	resources := s.o.Source.Resources(fleetID)
	if resources == nil {
		http.Error(w, fmt.Sprintf("fleet %s is not served by replica %s", fleetID, s.o.Replica), http.StatusNotFound)
		return
	}
	d, err := debug.Dump(fleetID, s.o.Replica, resources, only)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, d)
}

// history shows a fleet's recorded history, to a user who may get its
// EnvoyConfigs, as config does what it is served: the served revision is
// what config dumps, rendered.
func (s *Server) history(w http.ResponseWriter, req *http.Request) {
	fleetID := req.URL.Query().Get("fleet")
	id, err := fleet.Parse(fleetID)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !s.authorize(w, req, configResource, id.Namespace, "") {
		return
	}
	answer := debug.RecordedHistory{Fleet: fleetID, Replica: s.o.Replica}
	cm := &corev1.ConfigMap{}
	switch err := s.o.Histories.Get(req.Context(), client.ObjectKey{Namespace: s.o.Namespace, Name: history.Name(id)}, cm); {
	case apierrors.IsNotFound(err):
		writeJSON(w, answer)
		return
	case err != nil:
		s.o.Log.Error(err, "debug endpoint: reading a fleet's history", "fleet", fleetID)
		http.Error(w, "reading the fleet's history failed", http.StatusInternalServerError)
		return
	}
	h, err := history.Read(cm, s.o.Namespace, id)
	if err == nil {
		answer.History, err = debug.Shown(h)
	}
	if err != nil {
		// The operator does not use it either: the leader records it afresh.
		http.Error(w, fmt.Sprintf("the recorded history of fleet %s is not usable: %v", fleetID, err), http.StatusInternalServerError)
		return
	}
	answer.Recorded = true
	writeJSON(w, answer)
}

// authorize answers Forbidden, or an error, unless the user may get
// resource in namespace; it reports whether to go on.
func (s *Server) authorize(w http.ResponseWriter, req *http.Request, resource, namespace, name string) bool {
	ok, err := s.allowed(req.Context(), resource, namespace, name)
	if err != nil {
		s.o.Log.Error(err, "debug endpoint: authorizing", "namespace", namespace, "resource", resource)
		http.Error(w, "authorization failed", http.StatusInternalServerError)
		return false
	}
	if !ok {
		u := userOf(req.Context())
		http.Error(w, fmt.Sprintf("%s may not get %s.%s in namespace %s", u.GetName(), resource, group, namespace), http.StatusForbidden)
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
