package objects

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ControllerUIDIndex is the cache index of objects by the UID of their
// controller ownerReference: it finds the children of an owner, whatever their names.
const ControllerUIDIndex = "metadata.ownerReferences.controller.uid"

var (
	indexMu sync.Mutex
	indexed = map[indexKey]bool{}
)

type indexKey struct {
	indexer client.FieldIndexer
	kind    reflect.Type
}

// IndexByController registers ControllerUIDIndex for obj's kind on indexer.
// Several controllers own objects of one kind; the first registers the index
// and the others reuse it.
func IndexByController(ctx context.Context, indexer client.FieldIndexer, obj client.Object) error {
	indexMu.Lock()
	defer indexMu.Unlock()
	key := indexKey{indexer: indexer, kind: reflect.TypeOf(obj)}
	if indexed[key] {
		return nil
	}
	err := indexer.IndexField(ctx, obj, ControllerUIDIndex, func(o client.Object) []string {
		if ref := metav1.GetControllerOf(o); ref != nil {
			return []string{string(ref.UID)}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("indexing %T by controller: %w", obj, err)
	}
	indexed[key] = true
	return nil
}
