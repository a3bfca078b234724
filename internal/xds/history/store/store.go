// Package store reads and writes the fleets' revision histories in the API
// server, in the format of package history: Store alone does, so that a
// restarted or another replica serves exactly what the leader decided, and
// nothing a tenant wrote. Only the controller uses it; the format links no
// client, so kubectl envoy and the pure stages read histories without it.
package store

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
)

// Store reads and writes the fleets' histories in the API server: the
// ConfigMaps of history.ConfigMap, in the operator's namespace, and those
// the previous release kept (history.LegacyName), until they are taken
// over. Only what passes history.Read's checks is used: a copy anywhere else, one for
// another fleet, or one whose content is not consistent is ignored, and
// the leader writes it afresh.
//
// The migration from the previous release runs once per fleet: once Load
// found the fleet's history readable in the operator's namespace and no
// legacy history beside it (there was none, or RetireLegacy deleted it),
// it no longer looks for one. A Store is used by pointer, and not copied
// once used.
type Store struct {
	Client client.Client
	// APIReader reads past the cache, when a create says the cache is behind.
	APIReader client.Reader
	// Namespace is the operator's namespace, which holds the histories.
	Namespace string

	// migrated remembers, by fleet.ID, the fleets whose legacy history Load
	// found gone while their history was in the operator's namespace.
	migrated sync.Map
}

// Stored is what is recorded of one fleet's history in the API server. (Its
// name is older than the glossary's word, recorded.)
type Stored struct {
	// Object is the fleet's history in the operator's namespace, if there
	// is one (history.IsOf): an object of that name that is not is someone
	// else's, and creating the history will clash with it.
	Object *corev1.ConfigMap
	// History is what Object records, when it passed history.Read
	// (Readable), or else what the previous release's history may give
	// (history.AdoptLegacy); empty otherwise.
	History  publish.History
	Readable bool
	// Unusable is why Object did not pass history.Read, when it did not: the
	// leader writes the history afresh, and reports it (Load logs nothing,
	// for it is read on every reconcile, by every replica).
	Unusable error
	// Legacy is the fleet's history as the previous release kept it, in the
	// fleet's namespace, if there is one.
	Legacy *corev1.ConfigMap
}

// ErrCacheBehind: a write of a history was refused because the cache had
// not seen the recorded one yet (a conflict, or a create of a history that
// exists and is the fleet's). Deciding again on what is recorded settles it.
var ErrCacheBehind = errors.New("the cache is behind the fleet's history")

// Load reads the history of fleet id. vouched is the version that the
// fleet's EnvoyConfigs report as published (history.AdoptLegacy). It looks
// for the fleet's legacy history until the fleet is migrated (Store): while
// its history is not readable in the operator's namespace, the legacy one
// may be adopted; while both are there, the leader is to retire it.
func (s *Store) Load(ctx context.Context, id fleet.ID, vouched string) (Stored, error) {
	var st Stored
	cm := &corev1.ConfigMap{}
	switch err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: history.Name(id)}, cm); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return st, err
	case history.IsOf(cm, s.Namespace, id):
		st.Object = cm
		if h, err := history.Read(cm, s.Namespace, id); err != nil {
			st.Unusable = err
		} else {
			st.History, st.Readable = h, true
		}
	}
	if _, done := s.migrated.Load(id); done && st.Readable {
		return st, nil
	}
	legacy := &corev1.ConfigMap{}
	switch err := s.Client.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: history.LegacyName(id.Name)}, legacy); {
	case apierrors.IsNotFound(err):
		if st.Readable {
			s.migrated.Store(id, true)
		}
	case err != nil:
		return st, err
	case history.IsLegacyOf(legacy, id):
		st.Legacy = legacy
		if !st.Readable {
			st.History, _ = history.AdoptLegacy(legacy, id, vouched)
		}
	}
	return st, nil
}

// Record writes h as fleet id's history, over st.Object when there is one.
// An error wrapping ErrCacheBehind means another leader or an earlier
// reconcile wrote it first: read it again.
func (s *Store) Record(ctx context.Context, id fleet.ID, st Stored, h publish.History) error {
	want, err := history.ConfigMap(s.Namespace, id, h)
	if err != nil {
		return err
	}
	if st.Object == nil {
		err = s.Client.Create(ctx, want)
	} else {
		updated := st.Object.DeepCopy()
		updated.BinaryData, updated.Data = want.BinaryData, nil
		updated.Labels, updated.Annotations = want.Labels, want.Annotations
		err = s.Client.Update(ctx, updated)
	}
	if apierrors.IsConflict(err) || s.isOurs(ctx, id, err) {
		return fmt.Errorf("%w: %w", ErrCacheBehind, err)
	}
	return err
}

// isOurs reports whether err is the refused create of a history that
// exists and is the fleet's: the cache had not seen it yet.
func (s *Store) isOurs(ctx context.Context, id fleet.ID, err error) bool {
	if !apierrors.IsAlreadyExists(err) {
		return false
	}
	cm := &corev1.ConfigMap{}
	if s.APIReader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: history.Name(id)}, cm) != nil {
		return false
	}
	return history.IsOf(cm, s.Namespace, id)
}

// Forget deletes the history of a fleet that is gone, and its legacy one.
func (s *Store) Forget(ctx context.Context, st Stored) error {
	if id, ok := fleetOf(st, s.Namespace); ok {
		s.migrated.Delete(id)
	}
	var errs []error
	for _, cm := range []*corev1.ConfigMap{st.Object, st.Legacy} {
		if cm != nil {
			errs = append(errs, s.delete(ctx, cm))
		}
	}
	return errors.Join(errs...)
}

// RetireLegacy deletes the fleet's legacy history, if it has one: call it
// once the fleet's history is in the operator's namespace, or the fleet
// needs none.
func (s *Store) RetireLegacy(ctx context.Context, st Stored) error {
	if st.Legacy == nil {
		return nil
	}
	return s.delete(ctx, st.Legacy)
}

// fleetOf returns the fleet whose histories st holds.
func fleetOf(st Stored, namespace string) (fleet.ID, bool) {
	if st.Object != nil {
		return history.Fleet(st.Object, namespace)
	}
	if st.Legacy != nil {
		return history.LegacyFleet(st.Legacy)
	}
	return fleet.ID{}, false
}

// delete deletes cm, exactly the object that was read.
func (s *Store) delete(ctx context.Context, cm *corev1.ConfigMap) error {
	return client.IgnoreNotFound(s.Client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID}))
}

// Fleets returns the fleets that have a history, in the operator's
// namespace or as the previous release kept it.
func (s *Store) Fleets(ctx context.Context) ([]fleet.ID, error) {
	var histories, legacy corev1.ConfigMapList
	errs := []error{
		s.Client.List(ctx, &histories, client.InNamespace(s.Namespace), client.MatchingLabels{names.ComponentLabel: history.Component}),
		s.Client.List(ctx, &legacy, client.MatchingLabels{names.ComponentLabel: history.LegacyComponent}),
	}
	var out []fleet.ID
	for _, cm := range append(histories.Items, legacy.Items...) {
		id, ok := history.Fleet(&cm, s.Namespace)
		if !ok {
			id, ok = history.LegacyFleet(&cm)
		}
		if ok {
			out = append(out, id)
		}
	}
	return out, errors.Join(errs...)
}
