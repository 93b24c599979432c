package main

// A demo case's timeline: what each server did and when, built from the
// library's own log records (captured by a slog.Handler at Debug level) and
// from the demo's own steps (its calls, the Kick callback, the faults).

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// eventKind says how an event is painted.
type eventKind int

const (
	kindNote   eventKind = iota // background: reads, settings
	kindAction                  // a step of the protocol or of the demo
	kindGood                    // a wait ends well: loaded, released, taken over
	kindBad                     // a failure or a refusal
	kindWarn                    // a warning of the library
)

// event is one line of a timeline.
type event struct {
	at     time.Duration // since the case started
	server string        // "A", "B"
	text   string
	kind   eventKind
	// group: consecutive events of one server with the same group are
	// printed once with a count (presence reads, repeated requests).
	group string
}

// timeline collects a case's events; safe for concurrent use.
type timeline struct {
	start time.Time
	raw   io.Writer // every library record as it comes (-v), or nil

	once   *onceNotes // the notes the whole demo says once
	mu     sync.Mutex
	events []event
	muted  map[string]bool
}

// newTimeline starts a timeline now. raw, when not nil, receives every
// library log record as a text line; once holds the notes said already in
// this demo run (shared by its cases).
func newTimeline(raw io.Writer, once *onceNotes) *timeline {
	return &timeline{start: time.Now(), raw: raw, once: once, muted: make(map[string]bool)}
}

// onceGroup opens the group of an event that a demo run says once, however
// many servers and cases meet it (a fact about the Redis, not about a case).
const onceGroup = "once:"

// onceNotes is the set of once-groups a demo run has said; safe for
// concurrent use.
type onceNotes struct {
	mu   sync.Mutex
	said map[string]bool
}

// first reports whether group is said for the first time, and marks it said.
func (o *onceNotes) first(group string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.said[group] {
		return false
	}
	if o.said == nil {
		o.said = make(map[string]bool)
	}
	o.said[group] = true
	return true
}

// add records an event of server now.
func (t *timeline) add(server string, kind eventKind, text string) {
	t.addAt(time.Now(), server, kind, text, "")
}

// addAt records an event of server at time at, unless server is muted.
func (t *timeline) addAt(at time.Time, server string, kind eventKind, text, group string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.muted[server] {
		return
	}
	t.events = append(t.events, event{at: at.Sub(t.start), server: server, text: text, kind: kind, group: group})
}

// mute drops every later event of server: a killed server does nothing
// more, and the closing of a case is not part of its story.
func (t *timeline) mute(server string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.muted[server] = true
}

// list returns the events in time order.
func (t *timeline) list() []event {
	t.mu.Lock()
	evs := slices.Clone(t.events)
	t.mu.Unlock()
	slices.SortStableFunc(evs, func(a, b event) int { return cmp.Compare(a.at, b.at) })
	return evs
}

// logger returns a logger for server's Node that feeds the timeline.
func (t *timeline) logger(server string) *slog.Logger {
	return slog.New(&captureHandler{tl: t, server: server})
}

// captureHandler is the slog.Handler of one server's Node: every record at
// Debug level and above becomes an event.
type captureHandler struct {
	tl     *timeline
	server string
	attrs  []slog.Attr // from WithAttrs (the library adds job, driver, component)
}

var _ slog.Handler = (*captureHandler)(nil)

// Enabled implements slog.Handler: everything from Debug up.
func (h *captureHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelDebug }

// WithAttrs implements slog.Handler.
func (h *captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(slices.Clone(h.attrs), as...)
	return &c
}

// WithGroup implements slog.Handler; the library uses no groups, so the
// attributes stay flat.
func (h *captureHandler) WithGroup(string) slog.Handler { return h }

// Handle implements slog.Handler.
func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	a := make(map[string]string, r.NumAttrs()+len(h.attrs))
	var pairs []string
	add := func(at slog.Attr) bool {
		v := at.Value.Resolve()
		s := v.String()
		if v.Kind() == slog.KindDuration {
			s = human(v.Duration())
		}
		a[at.Key] = s
		pairs = append(pairs, at.Key+"="+s)
		return true
	}
	for _, at := range h.attrs {
		add(at)
	}
	r.Attrs(add)
	if h.tl.raw != nil {
		h.tl.mu.Lock()
		fmt.Fprintf(h.tl.raw, "%10.2fms %s %-5s %s %s\n", ms(r.Time.Sub(h.tl.start)), h.server, r.Level, r.Message,
			strings.Join(pairs, " "))
		h.tl.mu.Unlock()
	}
	text, kind, group := describe(r.Level, r.Message, a)
	if text == "" {
		return nil
	}
	if strings.HasPrefix(group, onceGroup) && h.tl.once != nil && !h.tl.once.first(group) {
		return nil
	}
	h.tl.addAt(r.Time, h.server, kind, text, group)
	return nil
}

// describe turns one library log record into a timeline line; "" for a
// debug record the timeline does not tell (it is in the raw log).
func describe(level slog.Level, msg string, a map[string]string) (text string, kind eventKind, group string) {
	switch {
	case msg == "handoff: request sent":
		return fmt.Sprintf("asks %s to release %s (request sent over NATS)", a["to"], a["key"]), kindAction, "request"
	case msg == "handoff: release requested":
		return fmt.Sprintf("release of %s requested by %s", a["key"], a["from"]), kindAction, "requested"
	case msg == "another server asked for a live session; ending it":
		return "the player is still connected here: ending that session", kindAction, ""
	case msg == "profile released":
		return fmt.Sprintf("release save of %s landed: data written, lock cleared (one round trip)", a["key"]), kindGood, ""
	case msg == "release failed; profile retained under its lock":
		return fmt.Sprintf("leave save of %s failed (%s): profile retained here under its lock", a["key"], a["err"]), kindBad, ""
	case msg == "another server asked for a retained profile; retrying its release":
		return "another server asks for the retained profile: retrying its release at once", kindAction, ""
	case msg == "handoff: reply sent":
		return fmt.Sprintf("reply sent to %s: %s is no longer played here", a["to"], a["key"]), kindAction, ""
	case msg == "handoff: reply received":
		return fmt.Sprintf("reply received: %s is no longer played there; B tries to take its lock", a["key"]), kindAction, ""
	case msg == "handoff: presence read":
		st := a["presence"]
		text = fmt.Sprintf("presence of %s read: %s", a["holder"], st)
		if st == "alive" && a["expires_in"] != "" {
			text += " (beat expires in " + a["expires_in"] + ")"
		}
		return text, kindNote, "presence:" + st
	case msg == "handoff: stale lock whose holder is not alive":
		return fmt.Sprintf("the lock is past LockTTL+LockSkew and %s reads %s", a["holder"], a["presence"]), kindWarn, ""
	case strings.HasPrefix(msg, "handoff: server ") && strings.HasSuffix(msg, "stopped beating presence"):
		silence := "its last beat " + a["silent_for"] + " ago"
		if a["silent_for"] == "" {
			silence = "silent for at least " + a["silent_for_at_least"]
		}
		return fmt.Sprintf("%s proven stopped: two stopped presence reads a beat apart (%s)",
			a["holder"], silence), kindWarn, ""
	case strings.HasPrefix(msg, "presence: new Redis run detected"):
		return "the presence hash is new (fresh namespace or Redis run): for one TTL a missing beat reads unknown, " +
			"never stopped", kindNote, ""
	case strings.HasPrefix(msg, "took the lock of "):
		return msg, kindGood, ""
	case level == slog.LevelInfo && strings.HasPrefix(msg, "could not read Redis's eviction policy"):
		return "this Redis answers neither INFO memory nor CONFIG GET (an in-process one, as the demo's embedded " +
			"Redis, or a proxy): its eviction policy is not known", kindNote, onceGroup + "eviction"
	}
	// Anything else, as the library says it; the library's other debug
	// records (every join, every write) would drown the story.
	if level < slog.LevelInfo {
		return "", kindNote, ""
	}
	text = msg
	for _, k := range []string{"key", "from", "to", "err"} {
		if v := a[k]; v != "" {
			text += " " + k + "=" + v
		}
	}
	switch {
	case level >= slog.LevelWarn:
		kind = kindWarn
	case level >= slog.LevelInfo:
		kind = kindAction
	}
	return text, kind, ""
}

// render prints the events, one line each, collapsing runs of one server's
// events of one group.
func render(w io.Writer, evs []event, st style) {
	for i := 0; i < len(evs); {
		e := evs[i]
		j := i + 1
		if e.group != "" {
			for j < len(evs) && evs[j].group == e.group && evs[j].server == e.server {
				j++
			}
		}
		fmt.Fprintf(w, "  %s  %s  %s\n", st.dim(fmt.Sprintf("%9.1f ms", ms(e.at))), st.server(e.server), paintKind(st, e.kind, e.text))
		if n := j - i - 1; n > 0 {
			times := "time"
			if n > 1 {
				times = "times"
			}
			fmt.Fprintf(w, "  %12s  %s  %s\n", "", " ", st.dim(fmt.Sprintf("… the same %d more %s, the last at %.1f ms", n, times, ms(evs[j-1].at))))
		}
		i = j
	}
}

// paintKind colours text after its kind.
func paintKind(st style, k eventKind, text string) string {
	switch k {
	case kindNote:
		return st.dim(text)
	case kindGood:
		return st.green(text)
	case kindBad:
		return st.red(text)
	case kindWarn:
		return st.yellow(text)
	}
	return text
}

// eventJSON is an event in --json output.
type eventJSON struct {
	AtMS   float64 `json:"at_ms"`
	Server string  `json:"server"`
	Event  string  `json:"event"`
}

// toJSON converts events for --json (every event, none collapsed).
func toJSON(evs []event) []eventJSON {
	out := make([]eventJSON, len(evs))
	for i, e := range evs {
		out[i] = eventJSON{AtMS: ms(e.at), Server: e.server, Event: e.text}
	}
	return out
}
