package datadriver_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ckernel/playerdata/testsupport"
)

// Loaded profiles that nothing is asked of hold no goroutine: their
// executors run on demand (a drain per burst of work) and end when idle.
func TestIdleProfilesHoldNoGoroutine(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a")
	d := players(t, s)
	ctx := ctxT(t)
	const n = 200
	before := runtime.NumGoroutine()
	for i := range n {
		p, err := d.Join(ctx, fmt.Sprintf("user:%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Save(ctx); err != nil { // work on its executor
			t.Fatal(err)
		}
	}
	// A drain ends when its mailbox is empty; a goroutine of its own per
	// profile would keep n more for good.
	eventually(t, 10*time.Second, "the executors' goroutines end", func() bool {
		return runtime.NumGoroutine()-before < n/10
	})
}
