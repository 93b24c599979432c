package record_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/rscript"
	"github.com/ckernel/playerdata/testsupport"
)

// seenCalls records each command a client sends: a script call by its
// name and ARGV, any other command by its name and arguments (but the
// connection's own HELLO and CLIENT).
type seenCalls struct {
	cat  *rscript.Catalog
	mu   sync.Mutex
	seen []string
}

func (s *seenCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *seenCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "hello" || name == "client" {
			return next(ctx, cmd)
		}
		line := fmt.Sprintln(cmd.Args()...)
		line = line[:len(line)-1]
		if in, ok := s.cat.Identify(cmd); ok {
			line = fmt.Sprintln(in.Name(), in.Args)
			line = line[:len(line)-1]
		}
		s.mu.Lock()
		s.seen = append(s.seen, line)
		s.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (s *seenCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ListForKeep reads the data a write keeps with a plain HGET, never
// through the listing's script (a string of megabytes passed through Lua
// holds Redis about twenty times as long as the HGET), and the data it
// answers is the record's; a record without data answers none.
func TestListForKeepReadsTheDataOutsideTheScript(t *testing.T) {
	r := testsupport.StartRedis(t)
	h := newHistorian(t, r, "listforkeep", 5, 3)
	rng := rand.New(rand.NewPCG(7, 7))
	h.writeN(rng, 3)
	rdb := r.Client(t)
	seen := &seenCalls{cat: rscript.NewCatalog(record.Scripts()...)}
	rdb.AddHook(seen)
	ctx := context.Background()

	hist, data, err := record.ListForKeep(ctx, rdb, h.key)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, h.data) {
		t.Fatalf("ListForKeep answered %d bytes of data, the record holds %d", len(data), len(h.data))
	}
	if n := len(hist.Versions); n == 0 {
		t.Fatal("ListForKeep listed no version of a record that kept some")
	}
	want := []string{record.ScriptVersions + " [1]", "hget " + h.key + " " + record.FieldData}
	if !slices.Equal(seen.seen, want) {
		t.Fatalf("ListForKeep sent %q, want %q (the listing with the newest version, then the data apart)", seen.seen, want)
	}

	if err := rdb.HDel(ctx, h.key, record.FieldData).Err(); err != nil {
		t.Fatal(err)
	}
	if _, data, err = record.ListForKeep(ctx, rdb, h.key); err != nil || data != nil {
		t.Fatalf("ListForKeep of a record without data: %d bytes, %v; want none, nil", len(data), err)
	}
}
