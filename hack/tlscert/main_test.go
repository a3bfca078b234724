package main

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
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

// With -mutual, the server's and the client's certificates chain to the CA
// written beside each, and a TLS handshake between them succeeds both ways.
func TestWriteMutual(t *testing.T) {
	dir := t.TempDir()
	if err := writeMutual(dir, []string{"localhost"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	load := func(sub string) (tls.Certificate, *x509.CertPool) {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, sub, "tls.crt"), filepath.Join(dir, sub, "tls.key"))
		if err != nil {
			t.Fatal(err)
		}
		ca, err := os.ReadFile(filepath.Join(dir, sub, "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			t.Fatalf("no CA in %s/ca.crt", sub)
		}
		return pair, pool
	}
	serverPair, serverCAs := load("server")
	clientPair, clientCAs := load("client")
	cConn, sConn := net.Pipe()
	srv := tls.Server(sConn, &tls.Config{Certificates: []tls.Certificate{serverPair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: serverCAs, MinVersion: tls.VersionTLS13})
	done := make(chan error, 1)
	go func() { done <- srv.Handshake() }()
	cli := tls.Client(cConn, &tls.Config{Certificates: []tls.Certificate{clientPair}, RootCAs: clientCAs, ServerName: "localhost", MinVersion: tls.VersionTLS13})
	if err := cli.Handshake(); err != nil {
		t.Fatalf("client: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("server: %v", err)
	}
}
