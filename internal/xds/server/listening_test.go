package server

import (
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
)

func TestListening(t *testing.T) {
	req := httptest.NewRequest("GET", "/readyz", nil)
	if err := New("127.0.0.1:0", logr.Discard()).Listening(req); err == nil {
		t.Error("a server that was not started passed the readiness check")
	}
	s, _ := startServer(t)
	if err := s.Listening(req); err != nil {
		t.Errorf("a listening server failed the readiness check: %v", err)
	}
}
