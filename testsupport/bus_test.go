package testsupport_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/ckernel/playerdata/messaging"
	"github.com/ckernel/playerdata/testsupport"
)

// Messages due at one instant arrive one per instant, in the order of
// their content, and what the receiver sets off for one (here a goroutine
// that counts it) is over before the next arrives: four alike notifications
// published at one instant are four handlings, not one or two as the
// scheduler has it.
func TestMemBusOneMessagePerInstant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := testsupport.NewMemBus(clock.New())
		defer bus.Close()
		bus.SetLatency(func(string, messaging.Message) time.Duration { return 500 * time.Nanosecond })
		type arrival struct {
			at      time.Time
			key     string
			settled int // handlings the receiver had finished when it arrived
		}
		var got []arrival
		var settled atomic.Int64
		done := make(chan struct{}, 16)
		if _, err := bus.Endpoint("a").Subscribe("a", func(m messaging.Message) {
			got = append(got, arrival{time.Now(), m.Key, int(settled.Load())})
			go func() { settled.Add(1); done <- struct{}{} }() // the receiver's work, on a goroutine of its own
		}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		b := bus.Endpoint("b")
		for _, key := range []string{"k2", "k1", "k1", "k1"} {
			if err := b.Publish(context.Background(), "a", messaging.Message{Type: messaging.TypeNotify, Driver: "D", Key: key, Sender: "b"}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Microsecond)
		synctest.Wait()
		if len(got) != 4 {
			t.Fatalf("%d of 4 messages arrived", len(got))
		}
		for i, a := range got {
			if want := start.Add(500*time.Nanosecond + time.Duration(i)); !a.at.Equal(want) {
				t.Errorf("message %d arrived at +%v, want +%v", i, a.at.Sub(start), want.Sub(start))
			}
			if a.settled != i {
				t.Errorf("message %d arrived when %d handlings were over, want %d", i, a.settled, i)
			}
		}
		if keys := []string{got[0].key, got[1].key, got[2].key, got[3].key}; keys[0] != "k1" || keys[3] != "k2" {
			t.Errorf("arrival order %v, want the content's (k1 k1 k1 k2)", keys)
		}
	})
}
