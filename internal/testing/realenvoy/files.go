package realenvoy

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write puts p's files and directories on disk, where its (adapted) paths
// say. Keys and certificates are readable by their owner only.
func Write(p Proxy) error {
	for _, d := range p.Dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	for path, data := range p.Files {
		if !filepath.IsAbs(path) {
			return fmt.Errorf("file %q: not an absolute path", path)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
