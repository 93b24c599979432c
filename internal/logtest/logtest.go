// Package logtest is the log sink the project's tests read: a buffer safe
// for concurrent writers, and a text slog.Logger over it. It imports nothing
// of the project, so every package's own tests can use it (testsupport's
// LogBuffer is this type).
package logtest

import (
	"io"
	"log/slog"
	"sync"
)

// Buffer is a concurrency-safe log sink whose lines a test can read. The
// zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf []byte
}

var _ io.Writer = (*Buffer)(nil)

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// Logger returns a text logger that writes to b at level and above.
func (b *Buffer) Logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: level}))
}
