package simulation

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/record"
)

// The tampers (Config.Tampers): what other tools and Redis itself do to the
// keys behind the library's back, outside its fault model, each through a
// plain Redis client: a field of a record broken, or its inbox or history
// replaced by a key of the wrong type, which the operator repairs a few
// seconds to a minute later with lockrule.Repair (what `playerdata repair
// --force` runs: repair.go); a record deleted (a stray DEL, an eviction),
// alone or with its inbox and history; the presence owners hash evicted;
// the operator's unlocks (operator.go). What the library must do then
// (DESIGN.md's invariant 12) is checked in tampercheck.go.

// tamperKind is a kind of tamper the fault draw picks.
type tamperKind int

const (
	tamperCorrupt  tamperKind = iota // a field broken, or the inbox or history replaced
	tamperDelete                     // a record deleted
	tamperOwners                     // the presence owners hash evicted
	tamperUnlock                     // the operator's unlock of a record, whoever holds it (operator.go)
	numTamperKinds                   // how many there are
)

// damage is what a tamper left on a record, from the tamper until the
// operator's repair (or, for a record deleted with nothing beside it, that
// reads as new, only the moment of the deletion).
type damage struct {
	pl       *player
	what     string    // what was broken: a field, "inbox", "history", or "(record)" for a deletion
	how      string    // how, for the trace
	from, to time.Time // to is zero while it stands
	repairAt time.Time // when the operator comes
	// refuses: every acquire must refuse the record while it stands (a
	// field every acquire checks); allows: a script may answer CORRUPT
	// while it stands; writes: no write may land while it stands (a field
	// every write checks).
	refuses, allows, writes bool
	waited                  bool // the operator said once that it waits for a lock's holder
}

// tamperState is what the simulation keeps of the tampers, guarded by
// sim.mu.
type tamperState struct {
	damages   map[string][]*damage             // record key -> its damages, oldest first (only the last may stand)
	deletions map[string][]uint64              // record key -> the event numbers (sim.seq) of its deletions
	lastEpoch map[string]int64                 // record key -> the epoch of its last acquisition since its last deletion
	tokenSeq  map[string]uint64                // lock token -> the event number of the acquisition that made it
	kickWhy   map[string]datadriver.KickReason // job+"\x00"+key -> the reason of its last Kick
	fullBeat  map[string]beatMark              // job -> its last full beat that was written
	reclaim   map[string]time.Time             // job -> an eviction of the owners hash it has to re-claim its entry after
	touched   map[*player]bool                 // players whose record a tamper damaged or deleted
	unlockAt  map[*player]time.Time            // the operator's next unlock of a player's record (operator.go)
	restores  map[string]*restoreOp            // record key -> the operator's restore under way (restore.go)
	gemsShift int64                            // gems the deletions took, less the Defaults' gems each record starts over with
}

// beatMark is a full beat of a server: when it was written, and by which
// instance (the owners hash's value for the server's JobID).
type beatMark struct {
	at   time.Time
	inst string
}

func newTamperState() tamperState {
	return tamperState{
		damages:   make(map[string][]*damage),
		deletions: make(map[string][]uint64),
		lastEpoch: make(map[string]int64),
		tokenSeq:  make(map[string]uint64),
		kickWhy:   make(map[string]datadriver.KickReason),
		fullBeat:  make(map[string]beatMark),
		reclaim:   make(map[string]time.Time),
		touched:   make(map[*player]bool),
		unlockAt:  make(map[*player]time.Time),
		restores:  make(map[string]*restoreOp),
	}
}

// Tampers counts what the tampers did and what the library answered.
type Tampers struct {
	Corrupted       int           // fields broken, or an inbox or history replaced by a key of the wrong type
	Deleted         int           // records deleted
	HeldDeleted     int           // of them, while a server held their lock
	OwnersEvicted   int           // evictions of the presence owners hash
	Repairs         int           // operator repairs that changed something
	Forced          int           // of them, with --force (a lock naming no holder freed, a missing record started over)
	Unlocks         int           // operator unlocks (of records held or not, by servers live, paused, cut or crashed)
	UnlocksFreed    int           // of them, that freed a lock (the lock rule said yes)
	UnlocksAlive    int           // of them, refused: the holder read alive
	UnlocksUnknown  int           // of them, refused: the holder's presence read unknown (or not yet proven stopped)
	Restores        int           // operator restores (Driver.RestoreAt, as `playerdata restore` runs it), whoever held the record
	RestoresDone    int           // of them, that took the lock and restored (or found the data as of then current)
	Rewound         int           // restores that wrote older data than the record held
	RewoundMessages int           // messages the rewound data no longer holds (lost by the operator's choice)
	JoinsRefused    int           // joins answered ErrCorruptRecord
	SlowestRefusal  time.Duration // the longest a join took to be refused, from the damage or its start
	WritesRefused   int           // writes answered corrupt: nothing written
	WritesGone      int           // writes that found their record gone: nothing written
	KickedCorrupt   int           // sessions kicked with ReasonRecordCorrupt
	KickedGone      int           // sessions kicked with ReasonRecordGone
	Exempted        int           // Updates let off invariant 9 after a deletion (see exemptDeleted)
	Reclaimed       int           // owner entries a full beat re-claimed after an eviction
}

// String is the per-run summary line's part on the tampers.
func (t Tampers) String() string {
	return fmt.Sprintf("tampers: %d corrupted, %d deleted (%d held), %d owners evictions, %d repairs (%d forced), "+
		"%d unlocks (%d freed, %d refused alive, %d unknown), %d restores (%d done, %d rewound, %d messages undone); %d joins refused (slowest %s), %d writes refused, %d found gone, %d kicked corrupt, "+
		"%d kicked gone, %d updates exempted, %d owner entries re-claimed",
		t.Corrupted, t.Deleted, t.HeldDeleted, t.OwnersEvicted, t.Repairs, t.Forced, t.Unlocks, t.UnlocksFreed, t.UnlocksAlive, t.UnlocksUnknown,
		t.Restores, t.RestoresDone, t.Rewound, t.RewoundMessages,
		t.JoinsRefused, t.SlowestRefusal,
		t.WritesRefused, t.WritesGone, t.KickedCorrupt, t.KickedGone, t.Exempted, t.Reclaimed)
}

// tamper does a tamper of kind k, chosen from the seed.
func (s *sim) tamper(k tamperKind) {
	switch k {
	case tamperCorrupt:
		s.corrupt()
	case tamperDelete:
		s.deleteRecord()
	case tamperOwners:
		s.evictOwners()
	default:
		s.operatorUnlock()
	}
}

// breakage is one way corrupt breaks a record: the field it sets (or the
// key beside the record it replaces by a string) and to what.
type breakage struct {
	what, how string
	value     func(now time.Time) string
	ahead     bool // a lock stamped ahead of the clock: broken only without the presence flag
}

// numBreakages is how many breakages there are.
const numBreakages = 9

// breakageOf is the i-th breakage.
func breakageOf(i int) breakage {
	fixed := func(v string) func(time.Time) string { return func(time.Time) string { return v } }
	switch i {
	case 0:
		return breakage{record.FieldVer, "ver set to 1.5e3", fixed("1.5e3"), false}
	case 1:
		return breakage{record.FieldEpoch, "epoch set to -1", fixed("-1"), false}
	case 2:
		return breakage{record.FieldInboxSeq, "inbox.seq set to seven", fixed("seven"), false}
	case 3:
		return breakage{record.FieldLockAt, "lock.at set to soon", fixed("soon"), false}
	case 4:
		return breakage{record.FieldLockAt, "lock.at stamped an hour ahead of the Redis clock",
			func(now time.Time) string { return strconv.FormatInt(now.Add(time.Hour).UnixMilli(), 10) }, true}
	case 5:
		return breakage{"inbox", "the inbox replaced by a string", fixed("oops"), false}
	case 6:
		return breakage{record.FieldLockPresence, "lock.presence set to x", fixed("x"), false}
	case 7:
		return breakage{record.FieldLockJob, "lock.job emptied", fixed(""), false}
	}
	return breakage{"history", "the history replaced by a string", fixed("oops"), false}
}

// tamperScript breaks a record that was ever acquired: KEYS its record,
// inbox and history; ARGV[1] the field to set, or 'inbox' / 'history' (the
// key to replace by a string), ARGV[2] the value. It answers {0} for a
// record never acquired (nothing is done), else {1, lock.token, lock.job,
// lock.presence, inbox.seq, hist.at, body...}: the record as it found it
// and the bodies of the inbox messages it destroyed.
var tamperScript = redis.NewScript(`
local rec = KEYS[1]
if redis.call('HEXISTS', rec, 'epoch') == 0 then
  return {0}
end
local f = redis.call('HMGET', rec, 'lock.token', 'lock.job', 'lock.presence', 'inbox.seq', 'hist.at')
local out = {1, f[1] or '', f[2] or '', f[3] or '', f[4] or '', f[5] or ''}
local what = ARGV[1]
if what == 'inbox' or what == 'history' then
  local k = KEYS[3]
  if what == 'inbox' then
    k = KEYS[2]
    if redis.call('TYPE', k)['ok'] == 'stream' then
      for _, e in ipairs(redis.call('XRANGE', k, '-', '+')) do
        for i = 1, #e[2], 2 do
          if e[2][i] == 'b' then
            out[#out + 1] = e[2][i + 1]
          end
        end
      end
    end
  end
  redis.call('DEL', k)
  redis.call('SET', k, ARGV[2])
else
  redis.call('HSET', rec, what, ARGV[2])
end
return out
`)

// corrupt breaks a field of a random player's record, or replaces its
// inbox or history by a key of the wrong type; the operator repairs it
// later (repairDue).
func (s *sim) corrupt() {
	pl := s.players[s.rng.IntN(len(s.players))]
	b := breakageOf(s.rng.IntN(numBreakages))
	delay := time.Duration(3+s.rng.IntN(58)) * time.Second
	rk, now := recordKey(pl.key), time.Now()
	if d := s.standing(rk); d != nil {
		s.logf("FAULT no tamper: the record of %s is broken already (%s)", pl.key, d.how)
		return
	}
	v, err := tamperScript.Run(context.Background(), s.checkRedis, []string{rk, record.InboxKey(rk), record.HistoryKey(rk)},
		b.what, b.value(now)).Slice()
	if err != nil {
		s.fail("tamper: %s: %v", pl.key, err)
		return
	}
	if n, _ := v[0].(int64); n == 0 {
		s.logf("FAULT no tamper: %s has no record yet", pl.key)
		return
	}
	f := strs(v[1:6])
	token, job, presenceFlag, seq, histAt := f[0], f[1], f[2], f[3], f[4]
	d := &damage{pl: pl, what: b.what, how: b.how, from: now, repairAt: now.Add(delay)}
	switch b.what {
	case record.FieldVer, record.FieldEpoch, record.FieldInboxSeq:
		d.refuses, d.allows, d.writes = true, true, true
	case record.FieldLockAt:
		// Refused while held (a holder's write heals it); a lock with the
		// presence flag stamped ahead is not broken: only a proof that its
		// holder stopped moves it.
		d.allows = token != "" && (!b.ahead || presenceFlag != "1")
	case record.FieldLockPresence, record.FieldLockJob:
		// Refused by an acquire while held; its holder writes on (no write
		// checks them) until its release, which clears the lock.
		d.allows = token != ""
	case "inbox":
		d.refuses, d.allows = seq != "" && seq != "0", true // a send refuses it, a load reads it when inbox.seq > 0
	default:
		d.refuses = histAt != "" // a load checks the history's type when a version was kept
		d.allows = d.refuses
	}
	lost := s.loseBodies(v[6:])
	held := "free"
	if token != "" {
		held = "held by " + job
	}
	s.logf("FAULT tamper: %s of %s (%s; refused: %v; %d messages lost with it); the operator repairs it in %s",
		b.how, pl.key, held, d.refuses, lost, delay)
	s.mu.Lock()
	s.result.Tampers.Corrupted++
	s.tampers.damages[rk] = append(s.tampers.damages[rk], d)
	s.tampers.touched[pl] = true
	s.mu.Unlock()
}

// strs reads the strings of a script's answer ("" for anything else).
func strs(vs []any) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i], _ = v.(string)
	}
	return out
}

// loseBodies marks the messages of bodies (inbox entries a tamper
// destroyed) lost: they may be in their player's record once, or not at
// all (invariant 10). It returns how many there were.
func (s *sim) loseBodies(bodies []any) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range strs(bodies) {
		var g gift
		if msgpack.Unmarshal([]byte(b), &g) == nil && s.msgs[g.N] != nil {
			s.msgs[g.N].lost = true
		}
	}
	return len(bodies)
}

// standing returns the damage that stands on the record at rk, or nil.
func (s *sim) standing(rk string) *damage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.standingLocked(rk)
}

func (s *sim) standingLocked(rk string) *damage {
	ds := s.tampers.damages[rk]
	if len(ds) == 0 || !ds[len(ds)-1].to.IsZero() {
		return nil
	}
	return ds[len(ds)-1]
}

// evictOwners deletes the presence owners hash, as an eviction would: every
// live server must re-claim its entry at its next full beat, and none may
// fence itself for it (checkReclaim, observeBeat).
func (s *sim) evictOwners() {
	key := ownerKey()
	n, err := s.checkRedis.HLen(context.Background(), key).Result()
	if err == nil {
		err = s.checkRedis.Del(context.Background(), key).Err()
	}
	if err != nil {
		s.fail("tamper: evict the owners hash: %v", err)
		return
	}
	s.logf("FAULT tamper: the presence owners hash is evicted (%d entries)", n)
	now := time.Now()
	alive := s.aliveServers()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.result.Tampers.OwnersEvicted++
	for _, srv := range alive {
		s.tampers.reclaim[srv.s.JobID] = now
	}
}

// deleteScript deletes a record that was ever acquired and carries no
// trade's mark (a trade in flight would lose a side: gems are conserved
// only by trades, see checkRecords): KEYS its record, inbox and history;
// ARGV[1] '1' to delete its inbox and history too. It answers {0} for a
// record never acquired, {2, trade} for one marked (nothing is done), else
// {1, data, holder job (empty when free), inbox (1 when its inbox remains,
// else 0), history (the same for its history), body...}: the bodies of the
// inbox messages it deleted.
var deleteScript = redis.NewScript(`
local f = redis.call('HMGET', KEYS[1], 'epoch', 'trade', 'data', 'lock.job', 'lock.token')
if not f[1] then
  return {0}
end
if f[2] and f[2] ~= '' then
  return {2, f[2]}
end
local holder = ''
if f[5] and f[5] ~= '' then
  holder = f[4] or ''
end
local out = {1, f[3] or '', holder, 0, 0}
if ARGV[1] == '1' then
  if redis.call('TYPE', KEYS[2])['ok'] == 'stream' then
    for _, e in ipairs(redis.call('XRANGE', KEYS[2], '-', '+')) do
      for i = 1, #e[2], 2 do
        if e[2][i] == 'b' then
          out[#out + 1] = e[2][i + 1]
        end
      end
    end
  end
  redis.call('DEL', KEYS[2], KEYS[3])
end
redis.call('DEL', KEYS[1])
out[4] = redis.call('EXISTS', KEYS[2])
out[5] = redis.call('EXISTS', KEYS[3])
return out
`)

// deleteRecord deletes a random player's record, held or not: alone (a
// stray DEL), or with its inbox and history (an eviction of all of them).
// By design the record is lost: its next join gets Defaults, at once when
// nothing remains beside it, else once the operator starts it over (`repair
// --force`), joins being refused meanwhile. From the deletion on, what the
// invariants held of the record is reset (forgetRecord).
func (s *sim) deleteRecord() {
	pl := s.players[s.rng.IntN(len(s.players))]
	all := s.rng.IntN(2) == 0
	delay := time.Duration(3+s.rng.IntN(58)) * time.Second
	rk, now := recordKey(pl.key), time.Now()
	if d := s.standing(rk); d != nil {
		s.logf("FAULT no deletion: the record of %s is broken already (%s)", pl.key, d.how)
		return
	}
	withKeys := "0"
	if all {
		withKeys = "1"
	}
	v, err := deleteScript.Run(context.Background(), s.checkRedis, []string{rk, record.InboxKey(rk), record.HistoryKey(rk)},
		withKeys).Slice()
	if err != nil {
		s.fail("tamper: delete %s: %v", pl.key, err)
		return
	}
	switch n, _ := v[0].(int64); n {
	case 0:
		s.logf("FAULT no deletion: %s has no record yet", pl.key)
		return
	case 2:
		s.logf("FAULT no deletion: the record of %s carries the mark of trade %v", pl.key, v[1])
		return
	}
	f := strs(v[1:3])
	data, holder := f[0], f[1]
	inbox, _ := v[3].(int64)
	hist, _ := v[4].(int64)
	what, held := "alone", "free"
	if all {
		what = "with its inbox and history"
	}
	if holder != "" {
		held = "held by " + holder
	}
	applied := s.forgetRecord(pl, data, holder != "")
	waiting := s.loseBodies(v[5:])
	lost := fmt.Sprintf("%d messages its data applied lost, %d waiting in its inbox lost; invariants 3, 4, 7 and 10 "+
		"start over for it", applied, waiting)
	if inbox+hist == 0 {
		s.logf("FAULT tamper: the record of %s is deleted %s (%s; %s): nothing remains beside it, it reads as new",
			pl.key, what, held, lost)
		return
	}
	s.logf("FAULT tamper: the record of %s is deleted %s (%s; %s): its inbox or history remains, "+
		"joins are refused until the operator starts it over in %s", pl.key, what, held, lost, delay)
	s.mu.Lock()
	s.tampers.damages[rk] = append(s.tampers.damages[rk], &damage{pl: pl, what: "(record)", how: "deleted " + what,
		from: now, repairAt: now.Add(delay), refuses: true, allows: true})
	s.mu.Unlock()
}

// forgetRecord resets what the invariants held of pl's record, deleted
// now with data: invariant 3's landed writes and the epochs (both start
// over), invariant 7's ledger (nothing is durable any more; what a save or
// release asked for before now never counts: durable), invariant 10's
// messages the data held (lost: in the final record once, or not at all),
// invariant 4's count (the record's gems are gone, its next load has the
// Defaults'), and which token each server landed last (invariant 6: the next
// one a server lands is its newest, whatever its epoch). It returns how many
// messages the data held.
func (s *sim) forgetRecord(pl *player, data string, held bool) int {
	rk := recordKey(pl.key)
	w, err := decodeWallet(data)
	if err != nil {
		s.fail("tamper: delete %s: %v", pl.key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.tampers.deletions[rk] = append(s.tampers.deletions[rk], s.seq)
	delete(s.tampers.lastEpoch, rk)
	delete(s.landed, rk)
	for k, h := range s.latest {
		if strings.HasPrefix(k, rk+"\x00") {
			h.stale = true
			s.latest[k] = h
		}
	}
	pl.floor, pl.lostAt = 0, time.Now()
	got := w.got()
	for _, k := range got {
		if k <= len(pl.sent) {
			pl.sent[k-1].lost = true
		}
	}
	s.tampers.gemsShift += initialGems - w.Gems
	s.tampers.touched[pl] = true
	s.result.Tampers.Deleted++
	if held {
		s.result.Tampers.HeldDeleted++
	}
	return len(got)
}

// ownerKey is the presence owners hash of the simulation's servers (one
// presence shard).
func ownerKey() string { return presencecore.OwnersKey(presencecore.KeyFor("sim")) }
