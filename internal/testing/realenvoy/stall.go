package realenvoy

import (
	"os"
	"path/filepath"
	"testing"
)

// Stalling returns the path of an executable, in a directory of the test's
// own, that answers --version as Envoy does and, asked to load anything,
// creates the file Running returns and never finishes (until it is killed):
// an Envoy that hangs, for the tests of what bounds a load.
func Stalling(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "envoy")
	script := `#!/bin/sh
if [ "$1" = "--version" ]; then
  echo "envoy  version: 0000000000000000000000000000000000000000/1.40.0/Clean/RELEASE/BoringSSL"
  exit 0
fi
touch '` + filepath.Join(dir, "running") + `'
exec sleep 3600
`
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// Running is the file that the Stalling executable at path creates once it
// runs a load.
func Running(path string) string { return filepath.Join(filepath.Dir(path), "running") }
