package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/ckernel/playerdata/internal/defaults"
	"github.com/ckernel/playerdata/internal/record"
)

// printInspect prints a report for people.
func printInspect(w io.Writer, st style, r *inspectReport) {
	row := func(label, value string) { fmt.Fprintf(w, "  %-10s %s\n", st.bold(label), value) }
	fmt.Fprintf(w, "%s %s\n", st.bold("record"), r.RecordKey)
	if !r.Exists {
		fmt.Fprintf(w, "  no record for key %q of driver %s in namespace %q\n", r.Key, r.Driver, r.Namespace)
		printMessages(w, st, r.Inbox, row)
		return
	}
	when := func(t time.Time) string {
		if t.IsZero() {
			return "write time unknown"
		}
		return fmt.Sprintf("%s (%s ago)", t.Local().Format("2006-01-02 15:04:05.000"), human(r.now.Sub(t).Round(time.Millisecond)))
	}
	printLockRows(st, r.Lock, row)
	for _, b := range r.Broken {
		shown := b.Field + " = " + strconv.Quote(b.Value)
		switch b.Field {
		case "(record)", "inbox", "history", "tries", "dead":
			shown = b.Field
		}
		row("broken", st.red(shown)+": repair: "+b.Repair)
	}
	row("epoch", r.brokenOr(record.FieldEpoch, strconv.FormatInt(r.Epoch, 10)))
	ver := r.brokenOr(record.FieldVer, strconv.FormatInt(r.Ver, 10))
	if r.WrittenAt != nil {
		ver += ", written " + when(*r.WrittenAt)
	}
	row("ver", fmt.Sprintf("%s, %d bytes of data", ver, r.DataBytes))
	if r.Schema > 0 || r.SchemaMin > 0 {
		row("schema", fmt.Sprintf("%d (a server needs at least %d migrations to load it)", r.Schema, r.SchemaMin))
	}
	switch {
	case r.Corrupt != nil:
		row("corrupt", st.red(r.Corrupt.String()))
	case r.DataNote != "":
		row("data", st.yellow(r.DataNote))
	}
	if r.LastRelease != nil {
		row("released", fmt.Sprintf("last release by token %s… at ver %d", r.LastRelease.TokenPrefix, r.LastRelease.Ver))
	}
	printMoveRows(st, r, when, row)
	row("trade", tradeLine(st, r.Trade))
	printMessages(w, st, r.Inbox, row)
	printVersionRows(st, r, when, row)
	fmt.Fprintf(w, "  → %s\n", wrapText(r.Verdict, 90, "    "))
	if r.Data != nil {
		var b bytes.Buffer
		if json.Indent(&b, r.Data, "  ", "  ") != nil {
			b.Reset()
			b.Write(r.Data)
		}
		fmt.Fprintf(w, "%s\n  %s\n", st.bold("data"), b.String())
	}
}

// printMoveRows prints the record's last move and one in flight.
func printMoveRows(st style, r *inspectReport, when func(time.Time) string, row func(label, value string)) {
	if m := r.LastMove; m != nil {
		line := fmt.Sprintf("move %s %s: %s → %s, %s", m.ID, m.State, m.From, m.To, when(m.At))
		if m.Why != "" {
			line += " (" + m.Why + ")"
		}
		row("moved", line)
	}
	switch m := r.MoveInFlight; {
	case m != nil:
		row("moving", st.yellow(fmt.Sprintf("move %s %s: %s → %s (in flight, as the holder answers)", m.ID, m.State,
			m.From, m.To)))
	case r.MoveQuery != "" && r.Lock != nil && r.Lock.Held:
		row("moving", r.MoveQuery)
	}
}

// printVersionRows prints the record's versions, current and kept, and
// what the kept ones weigh.
func printVersionRows(st style, r *inspectReport, when func(time.Time) string, row func(label, value string)) {
	if len(r.Versions) == 0 {
		row("versions", "none (no data saved yet)")
	}
	for i, v := range r.Versions {
		label := ""
		if i == 0 {
			label = "versions"
		}
		s := fmt.Sprintf("ver %d (current), %s", v.Ver, when(v.At))
		switch {
		case !v.Current && v.At.IsZero():
			s = fmt.Sprintf("ver %d, time unknown", v.Ver)
		case !v.Current:
			s = fmt.Sprintf("ver %d, %s, %s, %d bytes", v.Ver, when(v.At), v.Stored, v.Bytes)
			if v.Legacy {
				s += " (an earlier build's layout: its time and schema unchecked)"
			}
		}
		if v.Unreadable != "" {
			s += ", " + st.red("unreadable: "+v.Unreadable)
		}
		row(label, s)
	}
	if why := unreadableVersions(r.Versions); why != "" {
		row("", "→ "+st.red(wrapText(why, 84, "               ")))
	}
	if n := keptCount(r.Versions); n > 0 {
		row("history", fmt.Sprintf("%d bytes in %d kept %s (a driver's HistoryBytes bounds them, oldest trimmed first: "+
			"by default %d × MaxDataBytes, 32 MiB)", r.HistoryBytes, n, plural(n, "version", "versions"),
			defaults.HistoryBytesPerData))
	}
}

// brokenOr is shown, the field's stored value marked broken when it is,
// else shown.
func (r *inspectReport) brokenOr(field, shown string) string {
	for _, b := range r.Broken {
		if b.Field == field {
			return strconv.Quote(b.Value) + " (broken: not what the library writes)"
		}
	}
	return shown
}

// tradeLine is the trade row of a record: the pending trade, or none.
func tradeLine(st style, t *tradeReport) string {
	if t == nil {
		return "none pending"
	}
	if t.Error != "" {
		return t.ID + ": " + st.yellow(t.Error)
	}
	settled := 0
	for _, ok := range t.Settled {
		if ok {
			settled++
		}
	}
	return fmt.Sprintf("%s: %s by %s, %d of %d participants settled", t.ID, t.State, t.Coordinator, settled, len(t.Settled))
}

// printLockRows prints the lock and holder rows of a record.
func printLockRows(st style, l *lockReport, row func(label, value string)) {
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
			if why := cmp.Or(l.PresenceError, l.PresenceWhy); why != "" {
				alive += " (" + why + ")"
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

// printMessages prints the inbox row, what it means, each waiting message
// shown and the dead letters.
func printMessages(w io.Writer, st style, in *inboxReport, row func(label, value string)) {
	if in == nil {
		return
	}
	row("inbox", in.String())
	if in.Meaning != "" {
		row("", "→ "+wrapText(in.Meaning, 84, "               "))
	}
	for _, m := range in.Messages {
		s := m.ID
		if m.AgeMS != nil {
			s += ", " + human(msDuration(*m.AgeMS).Round(time.Millisecond)) + " old"
		}
		s += fmt.Sprintf(", %d bytes", m.Bytes)
		if m.IdemKey != "" {
			s += ", idempotency key " + strconv.Quote(m.IdemKey)
		}
		if m.Refusals > 0 {
			s += st.yellow(fmt.Sprintf(", refused %d %s, last by %s: %s", m.Refusals, plural(int(m.Refusals), "time", "times"),
				m.RefusedBy, strconv.Quote(m.LastError)))
		}
		if m.Damaged != "" {
			s += ", " + st.red("damaged: "+m.Damaged+" (no server applies it)")
		}
		row("", "  "+s)
	}
	if more := in.Count - int64(len(in.Messages)); more > 0 {
		row("", fmt.Sprintf("  … and %d more", more))
	}
	if in.Dead == 0 {
		row("dead", "no message dead-lettered")
		return
	}
	row("dead", st.red(fmt.Sprintf("%d %s dead-lettered", in.Dead, plural(int(in.Dead), "message", "messages"))))
	for _, d := range in.DeadMessages {
		s := fmt.Sprintf("%s (sent as %s), %d bytes, %d attempts, last refused by %s: %s", d.ID, d.OriginalID, d.Bytes,
			d.Attempts, d.RefusedBy, strconv.Quote(d.LastError))
		if d.IdemKey != "" {
			s += ", idempotency key " + strconv.Quote(d.IdemKey)
		}
		if d.Damaged != "" {
			s += ", " + st.red("damaged: "+d.Damaged)
		}
		row("", "  "+s)
	}
	if more := in.Dead - int64(len(in.DeadMessages)); more > 0 {
		row("", fmt.Sprintf("  … and %d older", more))
	}
}

// unreadableVersions says which kept versions cannot be read or restored
// and why, grouped by the damaged version they need; "" when all read.
func unreadableVersions(vs []versionReport) string {
	var parts []string
	for _, v := range vs {
		if v.Unreadable == "" || (v.Needs != 0 && v.Needs != v.Ver) {
			continue
		}
		var needing []string
		for _, o := range vs {
			if o.Needs == v.Ver && o.Ver != v.Ver {
				needing = append(needing, strconv.FormatInt(o.Ver, 10))
			}
		}
		p := fmt.Sprintf("ver %d is damaged", v.Ver)
		if v.Needs == 0 {
			p = fmt.Sprintf("ver %d is a delta with no whole version above it", v.Ver)
		}
		if len(needing) > 0 {
			p += fmt.Sprintf("; %s %s, %s, cannot be read either", plural(len(needing), "ver", "vers"),
				strings.Join(needing, ", "), plural(len(needing), "a delta that needs it", "deltas that need it"))
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + ". A restore to a time they cover fails and changes nothing; the other " +
		"versions read and restore"
}

// keptCount is how many of vs are kept versions (not the current data).
func keptCount(vs []versionReport) int {
	n := 0
	for _, v := range vs {
		if !v.Current {
			n++
		}
	}
	return n
}
