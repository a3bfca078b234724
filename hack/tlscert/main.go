// Command tlscert writes a self-signed TLS certificate and its key, in PEM,
// as tls.crt and tls.key in a directory: what `make run` puts in the
// sample's Kubernetes TLS Secret (config/samples/example_v1_envoyconfig_https.yaml).
// For local experiments only: nobody trusts it.
//
//	go run ./hack/tlscert DIR HOST...
//
// With -mutual it writes what a server and its clients need for mutual TLS
// instead: a CA, and in DIR/server and DIR/client a certificate it issued
// (for HOST..., and for a client) with its key and the CA, as tls.crt,
// tls.key and ca.crt. The benchmarks serve Contour's xDS with them
// (hack/bench.sh).
//
//	go run ./hack/tlscert -mutual DIR HOST...
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

func main() {
	args, mutual := os.Args[1:], false
	if len(args) > 0 && args[0] == "-mutual" {
		args, mutual = args[1:], true
	}
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: tlscert [-mutual] DIR HOST...")
		os.Exit(2)
	}
	write := write
	if mutual {
		write = writeMutual
	}
	if err := write(args[0], args[1:], time.Now()); err != nil {
		fmt.Fprintln(os.Stderr, "tlscert:", err)
		os.Exit(1)
	}
}

// write writes a certificate for hosts, valid for 30 days from now, and its
// key into dir.
func write(dir string, hosts []string, now time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: hosts[0]},
		DNSNames:     hosts,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(30 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
}

// writeMutual writes a CA and, issued by it for 30 days from now, a server
// certificate for hosts into dir/server and a client certificate into
// dir/client, each with its key and the CA's certificate.
func writeMutual(dir string, hosts []string, now time.Time) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	ca := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "tlscert CA"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := issue(ca, ca, caKey, caKey)
	if err != nil {
		return err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	for _, leaf := range []struct {
		sub   string
		name  string
		hosts []string
		usage x509.ExtKeyUsage
	}{{"server", hosts[0], hosts, x509.ExtKeyUsageServerAuth}, {"client", "tlscert client", nil, x509.ExtKeyUsageClientAuth}} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		der, err := issue(&x509.Certificate{
			Subject:     pkix.Name{CommonName: leaf.name},
			DNSNames:    leaf.hosts,
			NotBefore:   now.Add(-time.Minute),
			NotAfter:    now.Add(30 * 24 * time.Hour),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{leaf.usage},
		}, caCert, key, caKey)
		if err != nil {
			return err
		}
		if err := writeFiles(filepath.Join(dir, leaf.sub), der, key, caPEM); err != nil {
			return err
		}
	}
	return nil
}

// issue signs tmpl, with a random serial number, by parent and its key.
func issue(tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	return x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
}

// writeFiles writes a certificate, its key and the CA's certificate into
// dir as tls.crt, tls.key and ca.crt.
func writeFiles(dir string, der []byte, key *ecdsa.PrivateKey, caPEM []byte) error {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, b := range map[string][]byte{
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		"ca.crt":  caPEM,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}
