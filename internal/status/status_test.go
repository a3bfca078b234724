package status

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestResult(t *testing.T) {
	gr := schema.GroupResource{Resource: "things"}
	conflict := fmt.Errorf("updating status: %w", apierrors.NewConflict(gr, "x", errors.New("stale")))
	forbidden := apierrors.NewForbidden(gr, "x", errors.New("quota"))
	tests := []struct {
		name    string
		err     error
		clashed bool
		after   string
		wantErr bool
	}{
		{"settled", nil, false, "0s", false},
		{"clash: look again later", nil, true, ClashRecheck.String(), false},
		{"conflict: requeue, no error", conflict, false, ConflictRetry.String(), false},
		{"two conflicts", errors.Join(conflict, conflict), false, ConflictRetry.String(), false},
		{"a failure: retried with backoff", forbidden, false, "0s", true},
		{"a failure beside a conflict is still a failure", errors.Join(conflict, forbidden), true, "0s", true},
	}
	for _, tt := range tests {
		res, err := Result(tt.err, tt.clashed)
		if (err != nil) != tt.wantErr || res.RequeueAfter.String() != tt.after {
			t.Errorf("%s: Result = %+v, %v", tt.name, res, err)
		}
	}
}
