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
	"github.com/ckernel/playerdata/internal/record"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/presence"
	"github.com/ckernel/playerdata/transactions"
	"github.com/redis/go-redis/v9"
)

const inspectUsage = `Usage: playerdata inspect --driver NAME [flags] KEY

Shows the record of profile KEY of driver NAME: the lock holder, the first 8
characters of its token, the lock's age (Redis clock), its presence flag,
whether the holder beats presence now, epoch, ver, a pending trade and its
journal state, and the kept versions. Reads only; changes nothing.

Flags:
  --driver NAME        the driver's Config.Name, e.g. PlayerData (required)
  --redis URL          Redis (default $REDIS_URL, else redis://127.0.0.1:6379)
  --namespace NS       the servers' NodeConfig.Namespace (default none)
  --presence-ttl D     the servers' PresenceTTL, to read presence as they do (default 10s)
  --json               print one JSON object
`

// defaultRedisURL is where inspect and presence look without --redis or
// REDIS_URL.
const defaultRedisURL = "redis://127.0.0.1:6379"

// inspectJob is the JobID presence reads are made under; it never beats.
const inspectJob = "inspect"

// inspectFlags are the flags of inspect and presence.
type inspectFlags struct {
	conn        connFlags
	driver      string
	presenceTTL time.Duration
	json        bool
}

// addCommon adds the flags inspect and presence share.
func (f *inspectFlags) addCommon(c *command) {
	f.conn.addRedis(c.fs)
	c.fs.DurationVar(&f.presenceTTL, "presence-ttl", presence.DefaultTTL, "")
	c.fs.BoolVar(&f.json, "json", false, "")
}

// redisURL is --redis, else REDIS_URL, else the local default.
func (f *inspectFlags) redisURL() string {
	f.conn.fromEnv()
	if f.conn.redisURL == "" {
		return defaultRedisURL
	}
	return f.conn.redisURL
}

// presenceReader returns a Presence that only reads the hash of ns.
func presenceReader(rdb redis.UniversalClient, ns string, ttl time.Duration) (*presence.Presence, error) {
	if ttl < 4*time.Millisecond {
		return nil, fmt.Errorf("--presence-ttl %s is too short", ttl)
	}
	return presence.New(rdb, presence.Config{Key: presence.KeyFor(ns), JobID: inspectJob, TTL: ttl, Beat: ttl / 4})
}

// openReader connects to the Redis of f and builds the presence reader
// inspect and presence share; the caller closes the client.
func (f *inspectFlags) openReader(ctx context.Context, cmd string) (*redis.Client, *presence.Presence, error) {
	rdb, err := connectRedis(ctx, f.redisURL())
	if err != nil {
		return nil, nil, err
	}
	pres, err := presenceReader(rdb, f.conn.namespace, f.presenceTTL)
	if err != nil {
		_ = rdb.Close()
		return nil, nil, fmt.Errorf("%s: %w", cmd, err)
	}
	return rdb, pres, nil
}

// runInspect is "playerdata inspect".
func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("inspect", inspectUsage)
	var f inspectFlags
	f.addCommon(cmd)
	cmd.fs.StringVar(&f.driver, "driver", "", "")
	pos, err := cmd.parse(args, stdout, stderr)
	if err != nil {
		return err
	}
	switch {
	case f.driver == "":
		return cmd.mistake(stderr, "--driver is required")
	case len(pos) == 0:
		return cmd.mistake(stderr, "the profile KEY is required")
	case len(pos) > 1:
		return cmd.mistake(stderr, "one KEY only, got %d", len(pos))
	}
	key := pos[0]
	if err := datadriver.ValidName(f.driver); err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	if err := datadriver.ValidKey(key); err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	rdb, pres, err := f.openReader(ctx, "inspect")
	if err != nil {
		return err
	}
	defer rdb.Close()
	rep, err := inspectRecord(ctx, rdb, pres, f.conn.namespace, f.driver, key)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", key, err)
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printInspect(stdout, styleFor(stdout), rep)
	return nil
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
	Namespace   string          `json:"namespace"`
	Driver      string          `json:"driver"`
	Key         string          `json:"key"`
	RecordKey   string          `json:"record_key"`
	Exists      bool            `json:"exists"`
	Lock        *lockReport     `json:"lock,omitempty"`
	Epoch       int64           `json:"epoch"`
	Ver         int64           `json:"ver"`
	WrittenAt   *time.Time      `json:"written_at,omitempty"` // the current data's write (Redis clock)
	DataBytes   int64           `json:"data_bytes"`
	Format      string          `json:"format,omitempty"`
	LastRelease *releaseReport  `json:"last_release,omitempty"`
	Trade       *tradeReport    `json:"trade,omitempty"`
	Versions    []versionReport `json:"versions"`
	Verdict     string          `json:"verdict"`

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
}

// releaseReport is the record's last release (it lets a release whose
// answer was lost be recognised).
type releaseReport struct {
	TokenPrefix string `json:"token_prefix"`
	Ver         int64  `json:"ver"`
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
}

// historyField matches a history slot's version field, "h<n>.v".
var historyField = regexp.MustCompile(`^h([0-9]+)\.v$`)

// inspectRecord reads the record of driver/key and what it points to (the
// holder's presence, the trade journal).
func inspectRecord(ctx context.Context, rdb *redis.Client, pres *presence.Presence, ns, driver, key string) (*inspectReport, error) {
	rk := datadriver.RecordKey(ns, driver, key)
	rep := &inspectReport{Namespace: ns, Driver: driver, Key: key, RecordKey: rk, Versions: []versionReport{}}
	names, err := rdb.HKeys(ctx, rk).Result()
	if err != nil {
		return nil, err
	}
	fields := []string{record.FieldLockJob, record.FieldLockToken, record.FieldLockAt, record.FieldLockPresence,
		record.FieldEpoch, record.FieldVer, record.FieldAt, record.FieldReleased, record.FieldReleasedVer,
		record.FieldTrade, record.FieldFormat}
	var slots []int64
	for _, n := range names {
		if m := historyField.FindStringSubmatch(n); m != nil {
			s, _ := strconv.ParseInt(m[1], 10, 64)
			slots = append(slots, s)
			v, t, _ := record.SlotFields(s)
			fields = append(fields, v, t)
		}
	}
	var (
		hm    *redis.SliceCmd
		size  *redis.IntCmd
		clock *redis.TimeCmd
	)
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		hm = p.HMGet(ctx, rk, fields...)
		size = p.HStrLen(ctx, rk, record.FieldData)
		clock = p.Time(ctx)
		return nil
	}); err != nil {
		return nil, err
	}
	rep.now = clock.Val()
	if len(names) == 0 {
		rep.Verdict = "no record: the key was never loaded (or was wiped); a join creates it"
		return rep, nil
	}
	rep.Exists = true
	v := make(map[string]string, len(fields))
	for i, f := range fields {
		if s, ok := hm.Val()[i].(string); ok {
			v[f] = s
		}
	}
	num := func(f string) int64 { n, _ := strconv.ParseInt(v[f], 10, 64); return n }
	at := func(f string) time.Time {
		if n := num(f); n > 0 {
			return time.UnixMilli(n)
		}
		return time.Time{}
	}
	rep.Epoch, rep.Ver, rep.DataBytes, rep.Format = num(record.FieldEpoch), num(record.FieldVer), size.Val(), v[record.FieldFormat]

	lock := &lockReport{Held: v[record.FieldLockToken] != "", Holder: v[record.FieldLockJob],
		TokenPrefix: prefix8(v[record.FieldLockToken]), At: at(record.FieldLockAt), PresenceFlag: v[record.FieldLockPresence] == "1"}
	if !lock.At.IsZero() {
		lock.AgeMS = ms(rep.now.Sub(lock.At))
	}
	if lock.Held && lock.Holder != "" {
		r := pres.Read(ctx, lock.Holder)
		lock.HolderPresence = r.Status.String()
		if r.Status == presence.Alive {
			e := ms(r.ExpiresIn)
			lock.HolderExpiresInMS = &e
		}
		if r.Err != nil {
			lock.PresenceError = r.Err.Error()
		}
	}
	rep.Lock = lock
	if v[record.FieldReleased] != "" {
		rep.LastRelease = &releaseReport{TokenPrefix: prefix8(v[record.FieldReleased]), Ver: num(record.FieldReleasedVer)}
	}

	if w := at(record.FieldAt); !w.IsZero() {
		rep.WrittenAt = &w
	}
	if rep.DataBytes > 0 {
		rep.Versions = append(rep.Versions, versionReport{Ver: rep.Ver, At: at(record.FieldAt), Current: true})
	}
	for _, s := range slots {
		// A slot holds a version older than the current one; slots beyond
		// the driver's History (after it was lowered) linger until a wipe.
		vf, tf, _ := record.SlotFields(s)
		if ver := num(vf); ver < rep.Ver && v[vf] != "" {
			rep.Versions = append(rep.Versions, versionReport{Ver: ver, At: at(tf)})
		}
	}
	slices.SortFunc(rep.Versions, func(a, b versionReport) int { return cmp.Compare(b.Ver, a.Ver) })

	if id := v[record.FieldTrade]; id != "" {
		t := &tradeReport{ID: id}
		e, err := transactions.New(rdb, ns, 0).Read(ctx, id)
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
		rep.Trade = t
	}
	rep.Verdict = verdict(rep)
	return rep, nil
}

// verdict says in one sentence what a join of the key would meet.
func verdict(r *inspectReport) string {
	l := r.Lock
	var s string
	switch {
	case !l.Held:
		s = "the lock is free: a join on any server takes it at once"
	case !l.PresenceFlag:
		s = fmt.Sprintf("%s does not beat presence for this lock (handoff off, or an older build): it changes hands "+
			"when %s releases it, or once older than LockTTL+LockSkew (240 s by default)", l.Holder, l.Holder)
	case l.HolderPresence == "alive":
		s = fmt.Sprintf("held by %s, which is alive: a join elsewhere asks it to release (about one save); if it "+
			"does not, the join fails closed after LockWait. Age never frees a lock whose holder beats presence", l.Holder)
	case l.HolderPresence == "stopped":
		s = fmt.Sprintf("%s stopped beating presence: a waiting join proves it (two stopped reads a beat apart) and "+
			"takes the lock over with this record's data", l.Holder)
	default:
		s = fmt.Sprintf("%s's presence is unknown (Redis restarted or failed over less than one PresenceTTL ago, or "+
			"the read failed): the lock is kept until it reads alive or stopped", l.Holder)
	}
	if r.Trade != nil {
		s += fmt.Sprintf("; a trade is pending on the record (%s): the next load settles or aborts it first", r.Trade.ID)
	}
	return s
}

// printInspect prints a report for people.
func printInspect(w io.Writer, st style, r *inspectReport) {
	row := func(label, value string) { fmt.Fprintf(w, "  %-10s %s\n", st.bold(label), value) }
	fmt.Fprintf(w, "%s %s\n", st.bold("record"), r.RecordKey)
	if !r.Exists {
		fmt.Fprintf(w, "  no record for key %q of driver %s in namespace %q\n", r.Key, r.Driver, r.Namespace)
		return
	}
	when := func(t time.Time) string {
		return fmt.Sprintf("%s (%s ago)", t.Local().Format("2006-01-02 15:04:05.000"), human(r.now.Sub(t).Round(time.Millisecond)))
	}
	l := r.Lock
	age := time.Duration(l.AgeMS * float64(time.Millisecond))
	flag := "presence flag 0 (holder does not beat presence)"
	if l.PresenceFlag {
		flag = "presence flag 1"
	}
	if l.Held {
		row("lock", fmt.Sprintf("held by %s, token %s…, age %s, %s", st.bold(l.Holder), l.TokenPrefix, human(age), flag))
		alive := l.HolderPresence
		switch alive {
		case "alive":
			alive = st.green("alive") + " now"
			if l.HolderExpiresInMS != nil {
				alive += fmt.Sprintf(" (its beat expires in %s)", human(time.Duration(*l.HolderExpiresInMS*float64(time.Millisecond))))
			}
		case "stopped":
			alive = st.red("stopped") + " now (no live beat for a full PresenceTTL)"
		default:
			alive = st.yellow(alive) + " now"
			if l.PresenceError != "" {
				alive += " (" + l.PresenceError + ")"
			}
		}
		row("holder", l.Holder+" is "+alive)
	} else {
		free := "free"
		if !l.At.IsZero() {
			free += ", last changed " + human(age) + " ago"
		}
		row("lock", st.green(free))
	}
	row("epoch", strconv.FormatInt(r.Epoch, 10))
	ver := strconv.FormatInt(r.Ver, 10)
	if r.WrittenAt != nil {
		ver += ", written " + when(*r.WrittenAt)
	}
	row("ver", fmt.Sprintf("%s, %d bytes of data", ver, r.DataBytes))
	if r.LastRelease != nil {
		row("released", fmt.Sprintf("last release by token %s… at ver %d", r.LastRelease.TokenPrefix, r.LastRelease.Ver))
	}
	if t := r.Trade; t != nil {
		s := t.ID + ": "
		if t.Error != "" {
			s += st.yellow(t.Error)
		} else {
			settled := 0
			for _, ok := range t.Settled {
				if ok {
					settled++
				}
			}
			s += fmt.Sprintf("%s by %s, %d of %d participants settled", t.State, t.Coordinator, settled, len(t.Settled))
		}
		row("trade", s)
	} else {
		row("trade", "none pending")
	}
	if len(r.Versions) == 0 {
		row("versions", "none (no data saved yet)")
	}
	for i, v := range r.Versions {
		label := ""
		if i == 0 {
			label = "versions"
		}
		cur := ""
		if v.Current {
			cur = " (current)"
		}
		row(label, fmt.Sprintf("ver %d%s, %s", v.Ver, cur, when(v.At)))
	}
	fmt.Fprintf(w, "  → %s\n", wrapText(r.Verdict, 90, "    "))
}

// wrapText wraps s at width, indenting continuation lines.
func wrapText(s string, width int, indent string) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(s) {
		if i > 0 && n+1+len(word) > width {
			b.WriteString("\n" + indent)
			n = 0
		} else if i > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}
