package main

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"testing"
	"time"
)

// The files make a key pair that TLS accepts, for the hosts given.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	if err := write(dir, []string{"web.example.com", "www.example.com"}, now); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.VerifyHostname("www.example.com"); err != nil {
		t.Error(err)
	}
	if !cert.NotAfter.After(now.Add(29 * 24 * time.Hour)) {
		t.Errorf("valid until %s only", cert.NotAfter)
	}
}
