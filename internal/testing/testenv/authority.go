package testenv

import (
	"context"
	"errors"
	"testing"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
)

// Authority waits until the leader has made the xDS certificate authority
// and returns it. The suite's manager makes it once it runs, which a test
// may precede whatever order the tests run in.
func Authority(t testing.TB, ca *authority.Store) pki.Authority {
	t.Helper()
	var a pki.Authority
	Eventually(t, "the xDS certificate authority", func() (bool, error) {
		var err error
		a, err = ca.Authority(context.Background())
		if errors.Is(err, authority.ErrNoAuthority) {
			return false, nil
		}
		return err == nil, err
	})
	return a
}
