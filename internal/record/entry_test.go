package record

import (
	"bytes"
	"maps"
	"slices"
	"testing"

	"github.com/ckernel/playerdata/internal/damage"
)

// inboxEntry is an inbox entry's fields as send.lua writes them.
func inboxEntry() map[string]any {
	body := []byte("\x82\xa4gift\xa5sword\xa5count\x02")
	return map[string]any{EntryBody: string(body), EntryIdemKey: "shop-9911", EntrySumField: EntrySum("shop-9911", body)}
}

// deadEntry is a dead letter's fields as save.lua writes them: the
// message's, and the refusal's.
func deadEntry() map[string]any {
	m := inboxEntry()
	id, err, job := "1765000000123-0", "OnMessage: unknown gift", "server-a"
	m[DeadID], m[DeadTries], m[DeadErr], m[DeadJob] = id, "5", err, job
	m[DeadSum] = RefusalSum(id, err, job) + ",5"
	return m
}

// editEntry applies each edit of the attack to each field of fields:
// every byte flipped (each bit, all bits), cut at every byte, extended,
// deleted; check gets the edited fields and what was done.
func editEntry(fields map[string]any, check func(map[string]any, string)) {
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		damage.Every([]byte(fields[name].(string)), func(v []byte, what string) {
			e := maps.Clone(fields)
			e[name] = string(v)
			check(e, name+" "+what)
		})
		e := maps.Clone(fields)
		delete(e, name)
		check(e, name+" deleted")
	}
}

// checkMessage fails unless the entry is refused or reads as written.
func checkMessage(t *testing.T, vals map[string]any, what string) {
	t.Helper()
	want, got := MessageOf("1-0", inboxEntry()), MessageOf("1-0", vals)
	if got.Check() == nil && (!bytes.Equal(got.Body, want.Body) || got.Key != want.Key) {
		t.Fatalf("%s: read as body %q, key %q with no error; want refused or as sent", what, got.Body, got.Key)
	}
}

// checkDead fails unless the dead letter is named damaged or reads as
// written.
func checkDead(t *testing.T, vals map[string]any, what string) {
	t.Helper()
	want, got := DeadLetterOf("2-0", deadEntry()), DeadLetterOf("2-0", vals)
	if want.Damaged != nil {
		t.Fatalf("the dead letter as written is damaged: %+v", want.Damaged)
	}
	if got.Damaged == nil && (!bytes.Equal(got.Body, want.Body) || got.IdempotencyKey != want.IdempotencyKey ||
		got.MessageID != want.MessageID || got.Attempts != want.Attempts || got.Err != want.Err || got.Job != want.Job) {
		t.Fatalf("%s: read as %+v with nothing damaged; want it named or as written", what, got)
	}
}

// The attack of issue 32 on an inbox entry and a dead letter: every byte
// of every field flipped, cut, extended, deleted. Each is refused (a
// message is never applied, a dead letter is named damaged) or reads as
// written.
func TestEntriesEveryByte(t *testing.T) {
	editEntry(inboxEntry(), func(m map[string]any, what string) { checkMessage(t, m, what) })
	editEntry(deadEntry(), func(m map[string]any, what string) { checkDead(t, m, what) })
}

// FuzzInboxEntry edits one field of an inbox entry once: it is refused,
// or reads as sent.
func FuzzInboxEntry(f *testing.F) {
	fuzzEntry(f, inboxEntry(), func(t *testing.T, m map[string]any) { checkMessage(t, m, "edited") })
}

// FuzzDeadLetter edits one field of a dead letter once: it is named
// damaged, or reads as written.
func FuzzDeadLetter(f *testing.F) {
	fuzzEntry(f, deadEntry(), func(t *testing.T, m map[string]any) { checkDead(t, m, "edited") })
}

// fuzzEntry fuzzes one edit of one of fields' values (editOnce), checked
// by check.
func fuzzEntry(f *testing.F, fields map[string]any, check func(*testing.T, map[string]any)) {
	for field := range uint8(len(fields)) {
		f.Add(field, uint8(0), uint16(0), byte(1))
		f.Add(field, uint8(2), uint16(3), byte(0))
		f.Add(field, uint8(3), uint16(1), byte('7'))
	}
	names := slices.Sorted(maps.Keys(fields))
	f.Fuzz(func(t *testing.T, field, op uint8, pos uint16, b byte) {
		name := names[int(field)%len(names)]
		e := maps.Clone(fields)
		e[name] = string(damage.Once([]byte(fields[name].(string)), op, int(pos), b))
		check(t, e)
	})
}
