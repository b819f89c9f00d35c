package testutil

import (
	"bytes"
	"sync"
)

// LogBuffer is a bytes.Buffer safe for a writer and a reader in different
// goroutines: a server's or a generator's log, and the test reading it.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
