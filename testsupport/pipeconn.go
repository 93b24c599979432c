package testsupport

import (
	"net"
	"sync"
)

// writeBehindConn is the client end of an in-memory connection (a
// net.Pipe to miniredis) whose writes never block: they are queued and
// written through by goroutines of the connection. A net.Pipe has no
// buffer, so a pipeline larger than what the server reads at once (about
// 4 KiB) would deadlock: the client is still writing while the server,
// having read the first command, blocks writing its answer. A kernel
// socket buffers both ways; this gives the pipe the same. It waits only
// on channels, so a synctest bubble sees its goroutines durably blocked.
type writeBehindConn struct {
	net.Conn
	in, out   chan []byte
	closing   chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup

	mu  sync.Mutex
	err error // the first failed write, or net.ErrClosed after Close
}

// newWriteBehindConn wraps c; the goroutines it starts end at Close.
func newWriteBehindConn(c net.Conn) *writeBehindConn {
	w := &writeBehindConn{Conn: c, in: make(chan []byte), out: make(chan []byte), closing: make(chan struct{})}
	w.wg.Add(2)
	go w.queue()
	go w.write()
	return w
}

// Write queues p and returns at once, or returns the error of an earlier
// write.
func (w *writeBehindConn) Write(p []byte) (int, error) {
	w.mu.Lock()
	err := w.err
	w.mu.Unlock()
	if err != nil {
		return 0, err
	}
	select {
	case w.in <- append([]byte(nil), p...):
		return len(p), nil
	case <-w.closing:
		return 0, net.ErrClosed
	}
}

// queue holds what Write gave and not yet written, in order.
func (w *writeBehindConn) queue() {
	defer w.wg.Done()
	var q [][]byte
	for {
		var out chan []byte
		var head []byte
		if len(q) > 0 {
			out, head = w.out, q[0]
		}
		select {
		case p := <-w.in:
			q = append(q, p)
		case out <- head:
			q = q[1:]
		case <-w.closing:
			return
		}
	}
}

// write writes the queue through until Close or an error.
func (w *writeBehindConn) write() {
	defer w.wg.Done()
	for {
		select {
		case p := <-w.out:
			if _, err := w.Conn.Write(p); err != nil {
				w.fail(err)
				return
			}
		case <-w.closing:
			return
		}
	}
}

// fail records the first error.
func (w *writeBehindConn) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

// Close closes the connection and ends its goroutines.
func (w *writeBehindConn) Close() error {
	var err error
	w.closeOnce.Do(func() {
		w.fail(net.ErrClosed)
		close(w.closing)
		err = w.Conn.Close() // ends a write in flight
		w.wg.Wait()
	})
	return err
}
