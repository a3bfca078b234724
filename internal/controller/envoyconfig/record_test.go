package envoyconfig

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history/store"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// The record phase's storage, store.Store, against the API server, in a
// namespace of its own that the suite's controller does not keep histories
// in: a history is created, read back whole and updated; a write over a
// copy the cache has not caught up with (a create of a history that exists,
// an update of an older version) says the cache is behind; a create over
// someone else's ConfigMap of that name is a clash, not that; a forgotten
// history is gone, and listed no more.
func TestStoreRecordsTheHistory(t *testing.T) {
	ctx := context.Background()
	s := store.Store{Client: suite.Client, APIReader: suite.Client, Namespace: suite.Namespace(t)}
	id := fleet.ID{Namespace: suite.Namespace(t), Name: "edge"}
	revision := func(name string) publish.History {
		configs := []translate.Config{{Name: id.Namespace + "/" + name}}
		v := translate.VersionOf(configs)
		return publish.History{Current: v, Revisions: []publish.Revision{{Version: v, Configs: configs}}}
	}

	none, err := s.Load(ctx, id, "")
	if err != nil || none.Object != nil || none.Readable {
		t.Fatalf("Load before any record = %+v, %v", none, err)
	}
	first := revision("a")
	if err := s.Record(ctx, id, none, first); err != nil {
		t.Fatalf("Record: %v", err)
	}
	if err := s.Record(ctx, id, none, first); !errors.Is(err, store.ErrCacheBehind) {
		t.Errorf("a second create of the history = %v, want the cache behind", err)
	}
	read, err := s.Load(ctx, id, "")
	first.Fleet = id.String()
	if err != nil || read.Object == nil || !read.Readable || !reflect.DeepEqual(read.History, first) {
		t.Fatalf("Load = %+v, %v; want %+v", read, err, first)
	}
	if err := s.Record(ctx, id, read, revision("b")); err != nil {
		t.Fatalf("Record over the history: %v", err)
	}
	if err := s.Record(ctx, id, read, revision("c")); !errors.Is(err, store.ErrCacheBehind) || !apierrors.IsConflict(err) {
		t.Errorf("an update of an older version = %v, want a conflict, the cache behind", err)
	}
	if again, err := s.Load(ctx, id, ""); err != nil || again.History.Current != revision("b").Current {
		t.Errorf("after the update Load = %+v, %v; want version %s", again.History, err, revision("b").Current)
	}
	if ids, err := s.Fleets(ctx); err != nil || !slices.Contains(ids, id) {
		t.Errorf("Fleets = %v, %v; want %s among them", ids, err, id)
	}

	other := fleet.ID{Namespace: id.Namespace, Name: "other"}
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: history.Name(other)}}
	if err := suite.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Load(ctx, other, ""); err != nil || st.Object != nil {
		t.Errorf("Load of a fleet whose history's name is taken = %+v, %v; want nothing", st, err)
	}
	if err := s.Record(ctx, other, store.Stored{}, revision("a")); !apierrors.IsAlreadyExists(err) || errors.Is(err, store.ErrCacheBehind) {
		t.Errorf("a create over someone else's ConfigMap = %v, want a clash", err)
	}

	current, err := s.Load(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, current); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if gone, err := s.Load(ctx, id, ""); err != nil || gone.Object != nil {
		t.Errorf("after Forget Load = %+v, %v; want nothing", gone, err)
	}
	if ids, err := s.Fleets(ctx); err != nil || slices.Contains(ids, id) {
		t.Errorf("after Forget Fleets = %v, %v; want no %s", ids, err, id)
	}
}
