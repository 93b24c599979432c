package jobid_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ckernel/playerdata/internal/jobid"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/messaging"
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
		{strings.Repeat("a", jobid.MaxBytes), true},
		{"", false},
		{strings.Repeat("a", jobid.MaxBytes+1), false},
		{"server.a", false},
		{"server a", false},
		{"a*", false},
		{">", false},
		{"\x00run", false},
		{"tab\there", false},
		{"\xff", false},
	} {
		t.Run(tc.jobID, func(t *testing.T) {
			// A request must name its requester by a valid JobID.
			_, busErr := messaging.Encode(messaging.Message{Type: messaging.TypeRequest, Driver: "d", Key: "k", Requester: tc.jobID})
			_, presErr := presencecore.New(rdb, presencecore.Config{Key: "ns:CKPresence", JobID: tc.jobID})
			if (busErr == nil) != tc.ok || (presErr == nil) != tc.ok {
				t.Fatalf("messaging.Encode: %v; presencecore.New: %v; want ok=%v from both", busErr, presErr, tc.ok)
			}
			if !tc.ok && (!errors.Is(busErr, messaging.ErrMalformed) || !errors.Is(presErr, presencecore.ErrInvalidJobID)) {
				t.Fatalf("messaging.Encode: %v; presencecore.New: %v; want ErrMalformed and ErrInvalidJobID", busErr, presErr)
			}
			if (jobid.Check(tc.jobID) == nil) != tc.ok {
				t.Fatalf("Check(%q) = %v, want ok=%v", tc.jobID, jobid.Check(tc.jobID), tc.ok)
			}
		})
	}
}
