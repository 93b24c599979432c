package jobid_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ckernel/playerdata/messaging"
	"github.com/ckernel/playerdata/presence"
	"github.com/redis/go-redis/v9"
)

// TestOneRule: the bus and presence accept and refuse the same JobIDs, so a
// server presence lets beat is one the bus can reach.
func TestOneRule(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })
	for _, tc := range []struct {
		jobID string
		ok    bool
	}{
		{"server-a", true},
		{"pod_7-eu", true},
		{"サーバー", true},
		{strings.Repeat("a", messaging.MaxJobIDBytes), true},
		{"", false},
		{strings.Repeat("a", messaging.MaxJobIDBytes+1), false},
		{"server.a", false},
		{"server a", false},
		{"a*", false},
		{">", false},
		{"\x00run", false},
		{"tab\there", false},
		{"\xff", false},
	} {
		t.Run(tc.jobID, func(t *testing.T) {
			busErr := messaging.ValidJobID(tc.jobID)
			_, presErr := presence.New(rdb, presence.Config{Key: "ns:CKPresence", JobID: tc.jobID})
			if (busErr == nil) != tc.ok || (presErr == nil) != tc.ok {
				t.Fatalf("ValidJobID: %v; presence.New: %v; want ok=%v from both", busErr, presErr, tc.ok)
			}
			if !tc.ok && (!errors.Is(busErr, messaging.ErrInvalidJobID) || !errors.Is(presErr, presence.ErrInvalidJobID)) {
				t.Fatalf("ValidJobID: %v; presence.New: %v; want each package's ErrInvalidJobID", busErr, presErr)
			}
		})
	}
}
