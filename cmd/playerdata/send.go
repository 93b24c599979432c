package main

// playerdata send: store a message (a gift, a grant, a refund) for one
// profile, as Driver.Send does, whether the profile is live anywhere or not.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/defaults"
	"github.com/ckernel/playerdata/internal/record"
)

const sendUsage = `Usage: playerdata send --driver NAME [flags] KEY BODY_JSON

Sends a message to profile KEY of driver NAME, as the servers' Driver.Send
does: BODY_JSON (one JSON value, usually an object) is encoded with msgpack
(map keys sorted) and stored in the profile's inbox, a stream beside its
record, in one script call; the game's Config.OnMessage decodes it with
Message.Decode. Prints the message id. Each message is applied exactly once:
it leaves the inbox with the save that writes what it changed.

Who applies it:
  - a server holds the profile, --nats given: that server is told over NATS
    (one message, fire and forget) and applies it at once;
  - a server holds the profile, no NATS: it is not told, and applies it at
    its next autosave or inbox pull (within its Autosave period, 30 s by
    default), or when it releases the profile and the next load does;
  - no server holds it: the next load applies it before Join returns.
A server whose driver has no OnMessage leaves messages waiting.

The inbox is bounded like the servers bound it: when --max-inbox messages
wait already, nothing is stored and send fails (ErrInboxFull). A key with no
record under NAME is refused unless --allow-new (a typo in KEY, --driver or
--namespace would store a message nobody reads). Put -- before a BODY_JSON
that begins with '-'. A send that failed without an answer (a timeout, a
lost connection) may have stored the message: retry it with the same
--idempotency-key, which stores it at most once: a send whose key the
profile remembers stores nothing and says it was a duplicate (of which
message, and whether it still waits, was applied or lies in the dead
letters; one still waiting is announced to its holder again), and one that
reuses the key with another BODY_JSON, or within the window for another
KEY or --driver of the namespace, is refused, saying which profile the key
names (the key names one message). The body is compared as stored: the
msgpack of BODY_JSON.

Flags:
  --driver NAME         the driver's Config.Name, e.g. PlayerData (required)
  --nats URL            NATS, to tell the holder at once (default $NATS_URL; none when unset)
  --max-inbox N         the servers' Config.MaxInbox (default 1000)
  --max-message-bytes N the servers' Config.MaxMessageBytes (default 65536)
  --allow-new           send to a key that has no record yet (its first load applies it)
  --idempotency-key K   make the send safe to retry: a send with the same K stores nothing
                        new and prints the first message's id (while it waits or lies
                        dead, and for the servers' IdempotencyWindow, 24 h by default)
  --idempotency-window D   the servers' Config.IdempotencyWindow (default 24h)
  --max-idempotency-keys N the servers' Config.MaxIdempotencyKeys (default 10000)
  --subject-prefix NAME the servers' NodeConfig.SubjectPrefix (default CKHandoff)
  --request-key-file F  a file holding the servers' NodeConfig.RequestKey, byte for byte
  --redis URL           Redis, Redis Cluster (any node) or Sentinel (?master_name=M); default
                        $REDIS_URL, else redis://127.0.0.1:6379
  --namespace NS        the servers' NodeConfig.Namespace (default none)
  --presence-key NAME   the servers' NodeConfig.PresenceKey (default CKPresence)
  --presence-shards N   override the shard count the servers mark in "<key>:shards"
  --presence-ttl D      the servers' PresenceTTL (default 10s)
  --json                print one JSON object

With --nats the command runs a Node of its own for the moment of the send
(JobID "playerdata-send-<8 hex>", beating presence). Servers that
authenticate their messages (NodeConfig.RequestKey) drop its notification
unless --request-key-file names a file holding their key: without it the
holder applies the message as without NATS.

Exit status: 0 sent, or a duplicate; 1 failed (the inbox is full, the body
too large, the key names another message or the profile remembers
--max-idempotency-keys keys, Redis or NATS unreachable: nothing stored); 2
usage (BODY_JSON that is not JSON
included), no record of KEY without --allow-new, or a namespace or --driver
that holds nothing (the ones that do are listed).
`

// sendReport is what send did, and its --json output.
type sendReport struct {
	Namespace string `json:"namespace"`
	Driver    string `json:"driver"`
	Key       string `json:"key"`
	RecordKey string `json:"record_key"`
	ID        string `json:"id"`         // the message id
	BodyBytes int    `json:"body_bytes"` // the msgpack body's size
	// Duplicate: an earlier send with the same --idempotency-key stored the
	// message (ID); this one stored nothing. State is where that message is:
	// "waiting", "applied" or "dead".
	Duplicate bool   `json:"duplicate"`
	State     string `json:"state"`
	// Holder is the server holding the profile's lock just after the send
	// ("" when none); Notified says a notification was sent to it over
	// NATS.
	Holder   string       `json:"holder,omitempty"`
	Notified bool         `json:"notified"`
	Inbox    *inboxReport `json:"inbox"` // just after the send
	// Next says who applies the message, in one sentence.
	Next string `json:"next"`
}

// runSend is "playerdata send".
func runSend(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("send", sendUsage)
	var (
		f        readFlags
		af       adminFlags
		driver   string
		maxInbox int
		maxBytes int
		allowNew bool
		idemKey  string
		window   time.Duration
		maxKeys  int
	)
	f.add(cmd)
	af.add(cmd)
	cmd.fs.StringVar(&driver, "driver", "", "")
	cmd.fs.IntVar(&maxInbox, "max-inbox", defaults.MaxInbox, "")
	cmd.fs.IntVar(&maxBytes, "max-message-bytes", defaults.MaxMessageBytes, "")
	cmd.fs.BoolVar(&allowNew, "allow-new", false, "")
	cmd.fs.StringVar(&idemKey, "idempotency-key", "", "")
	cmd.fs.DurationVar(&window, "idempotency-window", defaults.IdempotencyWindow, "")
	cmd.fs.IntVar(&maxKeys, "max-idempotency-keys", defaults.MaxIdempotencyKeys, "")
	pos, err := cmd.parse(args, stdout)
	if err != nil {
		return err
	}
	switch {
	case driver == "":
		return cmd.mistake("--driver is required")
	case len(pos) < 2:
		return cmd.mistake("KEY and BODY_JSON are required, got %d argument(s)", len(pos))
	case len(pos) > 2:
		return cmd.mistake("KEY and BODY_JSON only, got %d arguments (quote the JSON)", len(pos))
	case maxInbox < 1:
		return cmd.mistake("--max-inbox %d: want the servers' MaxInbox, at least 1", maxInbox)
	case maxBytes < 1:
		return cmd.mistake("--max-message-bytes %d: want the servers' MaxMessageBytes, at least 1", maxBytes)
	case window <= 0 || maxKeys < 1:
		return cmd.mistake("--idempotency-window %s, --max-idempotency-keys %d: want the servers' IdempotencyWindow and "+
			"MaxIdempotencyKeys, above 0", window, maxKeys)
	}
	if err := f.check(cmd); err != nil {
		return err
	}
	if err := af.check(cmd); err != nil {
		return err
	}
	key := pos[0]
	if err := checkProfile("send", driver, key); err != nil {
		return err
	}
	body, err := jsonToMsgpack(pos[1])
	if err != nil {
		return cmd.mistake("BODY_JSON: %v", err)
	}
	r, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	if !allowNew {
		if err := checkRecordExists(ctx, r, driver, key); err != nil {
			return err
		}
	}
	rep, err := send(ctx, r, &f, &af, sendSpec{driver: driver, key: key, body: body, maxInbox: maxInbox, maxBytes: maxBytes,
		idemKey: idemKey, window: window, maxKeys: maxKeys}, stderr)
	if err != nil {
		return err
	}
	return emit(stdout, f.json, rep, func(w io.Writer, st style) { printSend(w, st, rep) })
}

// checkRecordExists refuses a send to a key with no record (status 2,
// with what the namespace holds), unless --allow-new.
func checkRecordExists(ctx context.Context, r *reader, driver, key string) error {
	n, err := r.rdb.Exists(ctx, record.Key(r.ns, driver, key)).Result()
	if err != nil {
		return fmt.Errorf("send %s: %w", key, err)
	}
	if n > 0 {
		return nil
	}
	if err := r.checkScope(ctx, driver, defaultScanLimit); err != nil {
		return err
	}
	return usagef("send %s: no record of the key under driver %s in namespace %q: check KEY, --driver and "+
		"--namespace, or give --allow-new to send to a profile never loaded; nothing was stored", key, driver, r.ns)
}

// sendSpec is what to send, and the servers' bounds.
type sendSpec struct {
	driver, key        string
	body               []byte
	maxInbox, maxBytes int
	idemKey            string // "" for none
	window             time.Duration
	maxKeys            int
}

// send sends body through a Driver[msgpack.RawMessage] of a Node of the
// CLI (with handoff on only when NATS is given: the notification needs the
// bus), then reads who holds the profile and its inbox.
func send(ctx context.Context, r *reader, f *readFlags, af *adminFlags, s sendSpec, stderr io.Writer) (*sendReport, error) {
	driver, key, body, maxInbox := s.driver, s.key, s.body, s.maxInbox
	natsURL := af.natsServer()
	a, err := openAdmin(ctx, r, f, af, adminSpec{command: "send", driver: driver, handoff: natsURL != "", natsURL: natsURL,
		cfg: datadriver.Config[msgpack.RawMessage]{MaxInbox: maxInbox, MaxMessageBytes: s.maxBytes, Autosave: -1,
			IdempotencyWindow: s.window, MaxIdempotencyKeys: s.maxKeys}}, stderr)
	if err != nil {
		return nil, fmt.Errorf("send %s: %w", key, err)
	}
	var rc datadriver.SendReceipt
	id, err := a.drv.Send(ctx, key, msgpack.RawMessage(body), datadriver.SendOptions{IdempotencyKey: s.idemKey, Receipt: &rc})
	cerr := a.close() // waits for the notification to reach NATS
	switch {
	case errors.Is(err, datadriver.ErrInboxFull):
		return nil, fmt.Errorf("%w: nothing was stored (--max-inbox %d: messages leave the inbox as the server holding "+
			"the profile applies and saves them)", err, maxInbox)
	case errors.Is(err, datadriver.ErrIdempotencyConflict):
		return nil, fmt.Errorf("%w (%s)", err, conflictHint(err))
	case errors.Is(err, datadriver.ErrTooManyIdempotencyKeys):
		return nil, fmt.Errorf("%w (--max-idempotency-keys %d, --idempotency-window %s: the servers' values)", err,
			s.maxKeys, s.window)
	case err != nil:
		return nil, err
	}
	rep := &sendReport{Namespace: r.ns, Driver: driver, Key: key, RecordKey: record.Key(r.ns, driver, key),
		ID: id, BodyBytes: len(body), Notified: rc.Notified && cerr == nil,
		Duplicate: rc.Duplicate, State: receiptState(rc)}
	if cerr != nil {
		fmt.Fprintf(stderr, "playerdata: warning: message %s is stored, but: %v\n", id, oneLine(cerr.Error()))
	}
	l, _, err := r.readLock(ctx, rep.RecordKey)
	if err != nil {
		return nil, fmt.Errorf("message %s is stored, but: %w", id, err)
	}
	if l.Held() {
		rep.Holder = l.Job
	}
	if rep.Inbox, err = r.readInbox(ctx, rep.RecordKey); err != nil {
		return nil, fmt.Errorf("message %s is stored, but: %w", id, err)
	}
	rep.Next = sendNext(rep, natsURL != "")
	return rep, nil
}

// conflictHint says what to do about an ErrIdempotencyConflict: the key
// names a message of another profile (the error names it), or another
// body's message of this one.
func conflictHint(err error) string {
	if ce := (*datadriver.IdempotencyConflictError)(nil); errors.As(err, &ce) && ce.OtherProfile() {
		return "--idempotency-key names one message of the namespace, and that message went to the profile named " +
			"above within the servers' --idempotency-window: give this one a key of its own"
	}
	return "--idempotency-key names one message of the profile: give this one a key of its own, or send the first " +
		"body again to retry it"
}

// receiptState is where a sent message is: "waiting", "applied" or "dead".
func receiptState(rc datadriver.SendReceipt) string {
	switch {
	case rc.Waiting:
		return "waiting"
	case rc.DeadLettered:
		return "dead"
	}
	return "applied"
}

// sendNext says who applies the message, in one sentence; for a duplicate,
// first that it is one.
func sendNext(rep *sendReport, withNATS bool) string {
	if rep.Duplicate {
		dup := "a duplicate: an earlier send with this --idempotency-key stored message " + rep.ID + "; nothing new was stored"
		switch rep.State {
		case "applied":
			return dup + ". It was applied and saved already: nothing more to do"
		case "dead":
			return dup + ". It lies in the dead letters (refused Config.MaxMessageAttempts times): playerdata inspect " +
				"shows why, playerdata replay puts it back once OnMessage is mended"
		}
		return dup + ". It still waits in the inbox; " + deliveryNext(rep, withNATS)
	}
	return deliveryNext(rep, withNATS)
}

// deliveryNext says who applies a waiting message.
func deliveryNext(rep *sendReport, withNATS bool) string {
	switch {
	case rep.Holder == "":
		return "no server holds the profile: the next load applies the message before Join returns"
	case rep.Notified:
		return rep.Holder + " holds the profile and was told over NATS: it applies the message and saves it in one " +
			"step within a round trip; inspect shows it still waiting after that only if it was refused (with the " +
			"refusal count) or " + rep.Holder + " cannot write to Redis"
	case !withNATS:
		return rep.Holder + " holds the profile; without --nats it was not told: it applies the message at its " +
			"next autosave or inbox pull (within its Autosave period), or the next load does"
	}
	return rep.Holder + " holds the profile, but no notification went out (it took the lock after the send, " +
		"or NATS failed): it applies the message at its next autosave or inbox pull"
}

// printSend prints a report for people: the message id first.
func printSend(w io.Writer, st style, r *sendReport) {
	if r.Duplicate {
		fmt.Fprintf(w, "%s %s already sent to %s of %s under this idempotency key (%s)\n", st.bold("message"), r.ID, r.Key,
			r.Driver, r.State)
	} else {
		fmt.Fprintf(w, "%s %s sent to %s of %s (%d bytes of msgpack)\n", st.bold("message"), r.ID, r.Key, r.Driver, r.BodyBytes)
	}
	fmt.Fprintf(w, "  %-10s %s\n", st.bold("inbox"), r.Inbox)
	fmt.Fprintf(w, "  → %s\n", wrapText(r.Next, 90, "    "))
}

// jsonToMsgpack parses s, one JSON value, and encodes it with msgpack:
// objects as maps with their keys sorted, integers in their smallest form
// (uint64 above the int64 range), other numbers as float64.
func jsonToMsgpack(s string) ([]byte, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("empty: want one JSON value, e.g. '{\"coins\": 50}'")
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, jsonError(s, err)
	}
	if off := dec.InputOffset(); strings.TrimSpace(s[off:]) != "" {
		return nil, fmt.Errorf("not valid JSON: more follows the value at byte %d: %q", off, strings.TrimSpace(s[off:]))
	}
	v, err := numbers(v)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := msgpack.NewEncoder(&b)
	enc.SetSortMapKeys(true)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode as msgpack: %w", err)
	}
	return b.Bytes(), nil
}

// jsonError says where s stops being JSON (the byte counted from 0, as
// inspect counts bytes in stored data).
func jsonError(s string, err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("not valid JSON at byte %d: %v", max(se.Offset-1, 0), se) // Offset counts the bytes read
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("not valid JSON: it ends after %d bytes, in the middle of a value", len(s))
	}
	return fmt.Errorf("not valid JSON: %w", err)
}

// numbers replaces the json.Numbers in v (as decoded with UseNumber) by
// int64, uint64 or float64.
func numbers(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return n, nil
		}
		if n, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return n, nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("the number %s does not fit a float64", x)
		}
		return f, nil
	case map[string]any:
		for k, e := range x {
			n, err := numbers(e)
			if err != nil {
				return nil, err
			}
			x[k] = n
		}
	case []any:
		for i, e := range x {
			n, err := numbers(e)
			if err != nil {
				return nil, err
			}
			x[i] = n
		}
	}
	return v, nil
}
