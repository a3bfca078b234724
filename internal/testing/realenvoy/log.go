package realenvoy

import (
	"bytes"
	"sync"
)

// Log is an Envoy's output as a test keeps it: the process writes it while
// the test reads it, for a failure's message.
type Log struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
