package main

// playerdata inspect: one profile record as an operator on call needs it:
// who holds the lock, since when, whether that server is alive now, and
// what the record holds.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/transactions"
)

const inspectUsage = `Usage: playerdata inspect --driver NAME [flags] KEY

Shows the record of profile KEY of driver NAME: the lock holder, the first 8
characters of its token, the lock's age (Redis clock), its presence flag,
whether the holder beats presence now, epoch, ver, a pending trade and its
journal state, the kept versions, and what a join of the key would meet now.
The stored data is always checked: data that does not decode as msgpack
makes the record corrupt, and the verdict says so. Reads only, in one MULTI
on the record's node.

Messages sent to the profile (playerdata send, Driver.Send) are told apart:
  waiting        in the inbox "<record>:inbox": each one's id, age, size and
                 idempotency key (the oldest 20), and what waiting means with
                 this holder: a live holder applies and saves a message in
                 one step within a round trip of being told of it (else at
                 its next autosave or pull), so one still here after that
                 was refused or the holder cannot write
  refused        "<record>:tries": how often a holder refused it, the last
                 error and the JobID that refused it
  dead-lettered  "<record>:dead": messages refused MaxMessageAttempts times,
                 which no server applies (the newest 20)

Flags:
  --driver NAME        the driver's Config.Name, e.g. PlayerData (required)
  --data               also print the profile data, decoded from msgpack, as JSON
  --redis URL          Redis, Redis Cluster (any node) or Sentinel (?master_name=M); default
                       $REDIS_URL, else redis://127.0.0.1:6379
  --namespace NS       the servers' NodeConfig.Namespace (default none)
  --presence-key NAME  the servers' NodeConfig.PresenceKey (default CKPresence)
  --presence-shards N  override the shard count the servers mark in "<key>:shards"
  --presence-ttl D     the servers' PresenceTTL, to read presence as they do (default 10s)
  --nats URL           also ask the lock's holder over NATS which move of the
                       profile is in flight (PREPARED, ACCEPTED); default
                       $NATS_URL; without it only the record's last move shows
                       (COMMITTED, CANCELLED)
  --subject-prefix P   the servers' NodeConfig.SubjectPrefix (default CKHandoff)
  --request-key-file F the servers' NodeConfig.RequestKey, to sign the question
  --json               print one JSON object

Exit status: 0 shown (a missing record included), 1 failed, 2 usage, or a
namespace or driver that holds nothing (the ones that do are listed).
`

// runInspect is "playerdata inspect".
func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("inspect", inspectUsage)
	var (
		f        readFlags
		driver   string
		showData bool
	)
	var af adminFlags
	f.add(cmd)
	af.add(cmd)
	cmd.fs.StringVar(&driver, "driver", "", "")
	cmd.fs.BoolVar(&showData, "data", false, "")
	pos, err := cmd.parse(args, stdout)
	if err != nil {
		return err
	}
	switch {
	case driver == "":
		return cmd.mistake("--driver is required")
	case len(pos) == 0:
		return cmd.mistake("the profile KEY is required")
	case len(pos) > 1:
		return cmd.mistake("one KEY only, got %d", len(pos))
	}
	if err := af.check(cmd); err != nil {
		return err
	}
	key := pos[0]
	r, err := f.openProfile(ctx, cmd, driver, key)
	if err != nil {
		return err
	}
	defer r.Close()
	rep, err := inspectRecord(ctx, r, driver, key, showData)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", key, err)
	}
	if err := askMoveInFlight(ctx, r, &af, rep, stderr); err != nil {
		return fmt.Errorf("inspect %s: %w", key, err)
	}
	if !rep.Exists {
		if err := r.checkScope(ctx, driver, defaultScanLimit); err != nil {
			return err
		}
	}
	return emit(stdout, f.json, rep, func(w io.Writer, st style) { printInspect(w, st, rep) })
}

// prefix8 is the first 8 characters of a lock token: enough to tell two
// locks apart, too little to forge a request (a token is a capability).
func prefix8(token string) string {
	if len(token) > 8 {
		return token[:8]
	}
	return token
}

// inspectReport is what inspect shows, and its --json output.
type inspectReport struct {
	Namespace   string      `json:"namespace"`
	PresenceKey string      `json:"presence_key"` // the presence hash read
	Driver      string      `json:"driver"`
	Key         string      `json:"key"`
	RecordKey   string      `json:"record_key"`
	Exists      bool        `json:"exists"`
	Lock        *lockReport `json:"lock,omitempty"`
	Epoch       int64       `json:"epoch"`
	Ver         int64       `json:"ver"`
	WrittenAt   *time.Time  `json:"written_at,omitempty"` // the current data's write (Redis clock)
	DataBytes   int64       `json:"data_bytes"`
	Format      string      `json:"format,omitempty"`
	// Schema is the schema version the data was written at (the writer's
	// number of migrations); SchemaMin the lowest a server may have to load
	// it (a server with fewer migrations answers ErrSchemaTooNew).
	Schema    int64 `json:"schema"`
	SchemaMin int64 `json:"schema_min"`
	// Data is the profile data as JSON (with --data, when it decodes).
	Data json.RawMessage `json:"data,omitempty"`
	// DataNote says what a load would make of data that decodes with
	// something odd about it (bytes after the value, not a map).
	DataNote string `json:"data_note,omitempty"`
	// Corrupt says why a load of the record fails (ErrCorruptRecord).
	Corrupt *corruptReport `json:"corrupt,omitempty"`
	// Broken are the fields and keys that are not what the library writes,
	// as stored (Epoch, Ver and the lock's numbers read 0 where broken).
	Broken      []brokenField  `json:"broken,omitempty"`
	LastRelease *releaseReport `json:"last_release,omitempty"`
	LastMove    *moveReport    `json:"last_move,omitempty"`
	// MoveInFlight is the holder's move of the profile in flight (with
	// --nats; nil when none is); MoveQuery says why it is unknown (no
	// --nats, no holder, no answer).
	MoveInFlight *moveReport  `json:"move_in_flight,omitempty"`
	MoveQuery    string       `json:"move_query,omitempty"`
	Trade        *tradeReport `json:"trade,omitempty"`
	// Inbox is the messages sent to the profile that wait to be applied
	// (there may be some for a key with no record: a send to a profile
	// never loaded).
	Inbox    *inboxReport    `json:"inbox"`
	Versions []versionReport `json:"versions"`
	// HistoryBytes is what the kept versions take in the history hash (a
	// driver's HistoryBytes bounds it).
	HistoryBytes int    `json:"history_bytes"`
	Verdict      string `json:"verdict"`

	now time.Time // Redis TIME when read
}

// lockReport is the record's lock.
type lockReport struct {
	Held         bool      `json:"held"`
	Holder       string    `json:"holder,omitempty"`
	TokenPrefix  string    `json:"token_prefix,omitempty"`
	At           time.Time `json:"at"`     // last acquire, save or release (Redis clock)
	AgeMS        float64   `json:"age_ms"` // Redis TIME now − lock.at
	PresenceFlag bool      `json:"presence_flag"`
	// The holder's presence now, read as the servers read it.
	HolderPresence    string   `json:"holder_presence,omitempty"` // alive, stopped, unknown
	HolderExpiresInMS *float64 `json:"holder_expires_in_ms,omitempty"`
	PresenceError     string   `json:"presence_error,omitempty"`
	// PresenceWhy says why an unknown presence proves nothing yet, from
	// what was read (the shard's run mark, INFO).
	PresenceWhy string `json:"presence_why,omitempty"`
}

// corruptReport is what makes a record corrupt: a field that does not
// decode, or a format newer than this build reads.
type corruptReport struct {
	Field  string `json:"field"`            // data, uids, meta or fmt
	Offset *int   `json:"offset,omitempty"` // where decoding failed, in bytes from the field's start
	Reason string `json:"reason"`
}

func (c *corruptReport) String() string {
	if c.Offset != nil {
		return fmt.Sprintf("its %s does not decode as msgpack at byte %d: %s", c.Field, *c.Offset, c.Reason)
	}
	return c.Reason
}

// releaseReport is the record's last release (it lets a release whose
// answer was lost be recognised).
type releaseReport struct {
	TokenPrefix string `json:"token_prefix"`
	Ver         int64  `json:"ver"`
}

// moveReport is a move (Profile.MoveTo): the record's last one, which its
// flip (COMMITTED) or its source once it failed (CANCELLED) wrote, or the
// one in flight, as its source answers (PREPARED, ACCEPTED; with --nats).
type moveReport struct {
	ID    string    `json:"id"`
	State string    `json:"state"` // PREPARED, ACCEPTED, COMMITTED, CANCELLED
	From  string    `json:"from"`
	To    string    `json:"to"`
	At    time.Time `json:"at,omitzero"`   // the flip or the cancel (Redis clock); none in flight
	Why   string    `json:"why,omitempty"` // why a CANCELLED move ended
}

// tradeReport is a pending trade and its journal entry.
type tradeReport struct {
	ID          string     `json:"id"`
	State       string     `json:"state,omitempty"` // PREPARED, COMMITTED, ABORTED
	Coordinator string     `json:"coordinator,omitempty"`
	OpenedAt    *time.Time `json:"opened_at,omitempty"`
	Settled     []bool     `json:"settled,omitempty"` // per participant
	Error       string     `json:"error,omitempty"`   // the journal could not be read
}

// versionReport is one kept version.
type versionReport struct {
	Ver     int64     `json:"ver"`
	At      time.Time `json:"at"`
	Current bool      `json:"current,omitempty"`
	// Stored is how a kept version is stored (whole, delta, or whole with
	// text metadata), Bytes what it takes in the history hash.
	Stored string `json:"stored,omitempty"`
	Bytes  int    `json:"bytes,omitempty"`
	// Legacy: stored in an earlier build's layout, whose time and schema
	// carry no checksum (validated, not proven).
	Legacy bool `json:"legacy,omitempty"`
	// Unreadable says why it cannot be read or restored; Needs is then the
	// damaged version it depends on (itself when it is damaged).
	Unreadable string `json:"unreadable,omitempty"`
	Needs      int64  `json:"needs,omitempty"`
}

// inspectFields are the record fields inspect reads (the data, user ids
// and metadata are read apart, for checkBlobs).
var inspectFields = []string{record.FieldLockJob, record.FieldLockToken, record.FieldLockAt, record.FieldLockPresence,
	record.FieldEpoch, record.FieldVer, record.FieldAt, record.FieldReleased, record.FieldReleasedVer,
	record.FieldTrade, record.FieldFormat, record.FieldSchema, record.FieldSchemaMin, record.FieldHistAt, record.FieldInboxSeq,
	record.FieldSum, record.FieldMoveID, record.FieldMoveState, record.FieldMoveFrom, record.FieldMoveTo, record.FieldMoveAt,
	record.FieldMoveWhy}

// inspectRecord reads the record of driver/key and what it points to (the
// holder's presence, the kept versions, the trade journal).
func inspectRecord(ctx context.Context, r *reader, driver, key string, withData bool) (*inspectReport, error) {
	rdb, ns := r.rdb, r.ns
	rk := record.Key(ns, driver, key)
	rep := &inspectReport{Namespace: ns, PresenceKey: r.presKey, Driver: driver, Key: key, RecordKey: rk, Versions: []versionReport{}}
	snap, err := r.readSnapshot(ctx, rk)
	if err != nil {
		return nil, err
	}
	size, hm, blobs, msgs, clock := snap.size, snap.hm, snap.blobs, snap.msgs, snap.clock
	rep.now = clock.Val()
	rep.Inbox = msgs.report(rep.now)
	v := make(map[string]string, len(inspectFields))
	for i, f := range inspectFields {
		if s, ok := hm.Val()[i].(string); ok {
			v[f] = s
		}
	}
	if rep.Broken, err = readBroken(ctx, r, rk, v); err != nil {
		return nil, err
	}
	if size.Val() == 0 {
		rep.Inbox.explain("", false, "")
		rep.Verdict = "no record: the key was never loaded (or was wiped); a join creates it"
		if bv := brokenVerdict(rep, rep.Broken); bv != "" {
			rep.Verdict = "no record, but " + bv
		}
		return rep, nil
	}
	rep.Exists = true
	num := func(f string) int64 { n, _ := strconv.ParseInt(v[f], 10, 64); return n }
	at := func(f string) time.Time {
		if n := num(f); n > 0 {
			return time.UnixMilli(n)
		}
		return time.Time{}
	}
	rep.Epoch, rep.Ver, rep.Format = num(record.FieldEpoch), num(record.FieldVer), v[record.FieldFormat]
	rep.Schema, rep.SchemaMin = num(record.FieldSchema), num(record.FieldSchemaMin)
	checkBlobs(rep, blobs.Val(), withData)
	checkSum(rep, v, blobs.Val())

	lock := &lockReport{Held: v[record.FieldLockToken] != "", Holder: v[record.FieldLockJob],
		TokenPrefix: prefix8(v[record.FieldLockToken]), At: at(record.FieldLockAt), PresenceFlag: v[record.FieldLockPresence] == "1"}
	if !lock.At.IsZero() {
		lock.AgeMS = ms(rep.now.Sub(lock.At))
	}
	if lock.Held && lock.Holder != "" {
		h := r.readHolder(ctx, lock.Holder)
		lock.HolderPresence, lock.PresenceError, lock.PresenceWhy = h.Status, h.Error, h.Why
		if h.reading.Status == presencecore.Alive {
			lock.HolderExpiresInMS = h.ExpiresInMS
		}
	}
	rep.Lock = lock
	holder := ""
	if lock.Held {
		holder = lock.Holder
	}
	rep.Inbox.explain(holder, lock.PresenceFlag, lock.HolderPresence)
	if v[record.FieldReleased] != "" {
		rep.LastRelease = &releaseReport{TokenPrefix: prefix8(v[record.FieldReleased]), Ver: num(record.FieldReleasedVer)}
	}
	if w := at(record.FieldAt); !w.IsZero() {
		rep.WrittenAt = &w
	}
	if v[record.FieldMoveID] != "" {
		rep.LastMove = &moveReport{ID: v[record.FieldMoveID], State: v[record.FieldMoveState], From: v[record.FieldMoveFrom],
			To: v[record.FieldMoveTo], At: at(record.FieldMoveAt), Why: v[record.FieldMoveWhy]}
	}
	versions, histBytes, err := readVersions(ctx, rdb, rk)
	if err != nil {
		return nil, err
	}
	rep.Versions, rep.HistoryBytes = versions, histBytes
	rep.Trade = readTrade(ctx, rdb, ns, v[record.FieldTrade])
	rep.Verdict = verdict(rep)
	return rep, nil
}

// recordSnapshot is what inspect reads of a record in one MULTI.
type recordSnapshot struct {
	size      *redis.IntCmd
	hm, blobs *redis.SliceCmd
	msgs      *messageReads
	clock     *redis.TimeCmd
}

// readSnapshot reads the record rk, its messages and the clock in one
// MULTI on the record's node: every key read shares its slot, and TIME is
// the clock of that node, which the servers' scripts read.
func (r *reader) readSnapshot(ctx context.Context, rk string) (*recordSnapshot, error) {
	node, err := r.nodeOf(ctx, rk)
	if err != nil {
		return nil, err
	}
	s := &recordSnapshot{}
	if _, err := node.TxPipelined(ctx, func(p redis.Pipeliner) error {
		s.size = p.HLen(ctx, rk)
		s.hm = p.HMGet(ctx, rk, inspectFields...)
		s.blobs = p.HMGet(ctx, rk, record.FieldData, record.FieldUserIDs, record.FieldMeta)
		s.msgs = queueMessageReads(ctx, p, rk)
		s.clock = p.Time(ctx)
		return nil
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// readVersions lists the record's versions, newest first: the current data
// and the kept ones, as record.Versions reads them, each kept one read
// (every chain of deltas decoded) to say whether it can be restored; and
// the bytes the kept ones take.
func readVersions(ctx context.Context, rdb redis.UniversalClient, rk string) ([]versionReport, int, error) {
	res, err := record.Versions(ctx, rdb, rk)
	if err != nil {
		return nil, 0, fmt.Errorf("versions: %w", err)
	}
	dec, err := newDecoder()
	if err != nil {
		return nil, 0, err
	}
	defer dec.Close()
	checked, err := res.History.Check(ctx, rdb, rk, dec)
	if err != nil {
		return nil, 0, fmt.Errorf("history: %w", err)
	}
	health := map[int64]record.Health{}
	for _, hv := range checked {
		health[hv.Ver] = hv
	}
	out := []versionReport{}
	if res.HasData {
		out = append(out, versionReport{Ver: res.Ver, At: res.At, Current: true})
	}
	for _, k := range res.Kept {
		if k.Ver >= res.Ver {
			continue
		}
		v := versionReport{Ver: k.Ver, At: k.At, Stored: k.Form.String(), Legacy: k.Legacy}
		if hv, ok := health[k.Ver]; ok {
			v.Bytes = hv.Bytes
			if hv.Err != nil {
				v.Unreadable, v.Needs = hv.Err.Error(), hv.Needs
			}
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b versionReport) int { return cmp.Compare(b.Ver, a.Ver) })
	return out, res.History.Bytes(), nil
}

// newDecoder is a decompressor of kept versions.
func newDecoder() (*zstd.Decoder, error) {
	enc, dec, err := record.NewCodec()
	if err != nil {
		return nil, err
	}
	_ = enc.Close()
	return dec, nil
}

// readTrade reads the journal entry of a pending trade id; nil when id is "".
func readTrade(ctx context.Context, rdb redis.UniversalClient, ns, id string) *tradeReport {
	if id == "" {
		return nil
	}
	t := &tradeReport{ID: id}
	e, err := transactions.New(rdb, ns).Read(ctx, id)
	switch {
	case errors.Is(err, transactions.ErrNotFound):
		t.Error = "no journal entry (a PREPARED trade whose entry expired or was never written: the next load aborts it)"
	case err != nil:
		t.Error = err.Error()
	default:
		t.State, t.Coordinator, t.Settled = string(e.State), e.Coordinator, e.Settled
		if !e.At.IsZero() {
			t.OpenedAt = &e.At
		}
	}
	return t
}

// verdict says in one sentence what a join of the key would meet.
func verdict(r *inspectReport) string {
	l := r.Lock
	var s string
	if bv := brokenVerdict(r, r.Broken); bv != "" {
		return bv
	}
	if c := r.Corrupt; c != nil {
		s = fmt.Sprintf("the record is corrupt: %s. Every load of it fails with ErrCorruptRecord and leaves it as it is "+
			"(restore a kept version with playerdata restore --at TIME, or Driver.RestoreAt; or wipe it)", c)
		if l.Held {
			s += fmt.Sprintf("; its lock is held by %s (%s)", l.Holder, cmp.Or(l.HolderPresence, "presence not read"))
		}
		return s
	}
	switch {
	case !l.Held:
		s = "the lock is free: a join on any server takes it at once"
	case !l.PresenceFlag:
		s = fmt.Sprintf("%s does not beat presence for this lock (handoff off): it changes hands "+
			"when %s releases it, or once older than LockTTL+LockSkew (240 s by default)", l.Holder, l.Holder)
	case l.HolderPresence == "alive":
		s = fmt.Sprintf("held by %s, which is alive: a join elsewhere asks it to release (about one save); if it "+
			"does not, the join fails closed after LockWait. Age never frees a lock whose holder beats presence", l.Holder)
	case l.HolderPresence == "stopped":
		s = fmt.Sprintf("%s stopped beating presence: a waiting join proves it (two stopped reads a beat apart) and "+
			"takes the lock over with this record's data", l.Holder)
	case l.PresenceError != "":
		s = fmt.Sprintf("%s's presence could not be read (%s): the lock is kept until it reads alive or stopped",
			l.Holder, l.PresenceError)
	default:
		s = fmt.Sprintf("%s's presence is unknown (%s): the lock is kept until it reads alive or stopped", l.Holder, l.PresenceWhy)
	}
	if r.Trade != nil {
		s += fmt.Sprintf("; a trade is pending on the record (%s): the next load settles or aborts it first", r.Trade.ID)
	}
	if r.SchemaMin > 0 {
		s += fmt.Sprintf("; a server whose driver has fewer than %d migrations refuses it (ErrSchemaTooNew)", r.SchemaMin)
	}
	return s
}
