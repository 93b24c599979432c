//go:build linux

package faulttest

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Register is the profile the gameserver plays in traffic mode (-traffic):
// a counter every accepted Update bumps, and the id of that Update. A
// value names the write that made it, so the checker can tell which write
// an acquire loaded.
type Register struct {
	N  int64  `msgpack:"n" json:"n"`
	Op string `msgpack:"op" json:"op,omitempty"` // the Update that set N ("" for the defaults)
}

// String is "N/op".
func (r Register) String() string {
	if r.Op == "" {
		return fmt.Sprintf("%d", r.N)
	}
	return fmt.Sprintf("%d/%s", r.N, r.Op)
}

// The kinds of operation a traffic history records (HistLine.Kind).
const (
	// KindAcquire: a Join. Its return carries the session, the epoch and
	// the value loaded; Adopt when the join adopted a retained profile of
	// the same process (the same session goes on).
	KindAcquire = "acquire"
	// KindUpdate: an Update; its return carries the value before (From)
	// and after (V) when the function ran.
	KindUpdate = "update"
	// KindSave: a Save of V.
	KindSave = "save"
	// KindRelease: a Release of V, called by the game.
	KindRelease = "release"
	// KindLibRelease: a release the library began on its own (another
	// server's join asked for the key, or Node.Close): its call is written
	// by OnRelease with the data it saves (V), its return when Done closes.
	KindLibRelease = "librelease"
	// KindFree: an operator's verb that freed the key's lock (`playerdata
	// unlock`, `playerdata repair --force`), run by the robustness suite
	// against live sessions: it ends whatever session owns the key, so
	// that session's later Update is illegal. Its Sess is the operator.
	KindFree = "free"
	// KindMove: a MoveTo of V by the session to another server (a
	// release of V by the session to a server named by the move; the
	// target's Join of it acquires V).
	KindMove = "move"
)

// The outcomes of an operation (HistLine.Out on a return line).
const (
	// OutOK: it took effect.
	OutOK = "ok"
	// OutFail: it did not, as the library's error says (a fenced or
	// refused write, an Update refused).
	OutFail = "fail"
	// OutUnknown: it may or may not have taken effect (a timeout, a lost
	// answer, a release still retried). A call line with no return line
	// (the process was killed) is unknown too.
	OutUnknown = "unknown"
)

// HistLine is one line of a traffic history: the call of an operation,
// written before the library is called, or its return, written after.
// Times are CLOCK_MONOTONIC nanoseconds (MonoNow), which every process of
// the machine reads alike.
type HistLine struct {
	T     int64     `json:"t"`
	Ret   bool      `json:"ret,omitempty"` // a return line
	Op    string    `json:"op"`            // unique over every process of a run
	Kind  string    `json:"kind,omitempty"`
	Key   string    `json:"key,omitempty"`
	Sess  string    `json:"sess,omitempty"` // the session (JobID, process, epoch) the op ran in
	Epoch int64     `json:"epoch,omitempty"`
	V     *Register `json:"v,omitempty"`
	From  *Register `json:"from,omitempty"`
	Adopt bool      `json:"adopt,omitempty"`
	Ended bool      `json:"ended,omitempty"` // acquire: the profile Join returned had ended already, not by a release (Err)
	Out   string    `json:"out,omitempty"`
	Err   string    `json:"err,omitempty"`
}

// MonoNow reads CLOCK_MONOTONIC in nanoseconds: one clock for every
// process of the machine (Go's monotonic readings are per process).
func MonoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("faulttest: clock_gettime(CLOCK_MONOTONIC): %v", err)) // cannot fail on Linux
	}
	return ts.Nano()
}

// HistoryWriter appends HistLines to a file, one write(2) per line and no
// buffer, so a process killed with -9 loses no line it wrote.
type HistoryWriter struct {
	mu  sync.Mutex
	f   *os.File
	err error // the first write error; later lines are dropped
}

// OpenHistory opens path for appending (creating it).
func OpenHistory(path string) (*HistoryWriter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &HistoryWriter{f: f}, nil
}

// Write stamps l with MonoNow, unless it has a time, and appends it.
func (w *HistoryWriter) Write(l HistLine) {
	if l.T == 0 {
		l.T = MonoNow()
	}
	b, err := json.Marshal(l)
	if err != nil {
		panic(fmt.Sprintf("faulttest: encode history line: %v", err)) // a bug: HistLine always encodes
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		_, w.err = w.f.Write(b)
	}
}

// Close closes the file and returns the first write error.
func (w *HistoryWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.f.Close(); w.err == nil {
		w.err = err
	}
	return w.err
}
