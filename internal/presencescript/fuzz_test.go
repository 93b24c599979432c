package presencescript

import (
	"strings"
	"testing"
	"time"
)

// FuzzBeatWire: a beat's arguments go on the wire and come back as they
// were (TTL and the expected expiry at ms precision, the count only when it
// is written), whatever the JobID and instance hold, and any ARGV at all is
// read without a panic: an error or a beat.
func FuzzBeatWire(f *testing.F) {
	f.Add("server-a", "i1", int64(10_000), int64(1_900_000_000_123), true, true, 7, "server-a\x0010000\x00i1\x000")
	f.Add("", "", int64(0), int64(0), false, false, 0, "")
	f.Add("a,b", "\x00", int64(-5), int64(-1), false, true, -3, "x\x00-1\x00y\x001\x001\x00-2")
	f.Fuzz(func(t *testing.T, job, instance string, ttlMS, expectedMS int64, check, write bool, sessions int,
		raw string) {
		a := BeatArgs{JobID: job, TTL: time.Duration(ttlMS) * time.Millisecond, Instance: instance, Check: check,
			WriteSessions: write, Sessions: sessions}
		if expectedMS != 0 {
			a.Expected = time.UnixMilli(expectedMS)
		}
		// TTLs whose ns fit a Duration, instants within a million years, a
		// count the script can write.
		valid := ttlMS >= -(1<<40) && ttlMS <= 1<<40 && expectedMS >= -(1<<45) && expectedMS <= 1<<45 &&
			(!write || sessions >= 0)
		if valid {
			got, err := ParseBeatArgs(Beat.Wire(a))
			if err != nil {
				t.Fatalf("ParseBeatArgs(Wire(%+v)): %v", a, err)
			}
			if !write {
				a.Sessions = 0
			}
			if got != a {
				t.Fatalf("round trip %+v, want %+v", got, a)
			}
		}
		_, _ = ParseBeatArgs(strings.Split(raw, "\x00"))
	})
}

// FuzzBeatAnswer: any reply of the shapes Redis gives (integers, strings,
// arrays of them) is read without a panic, and an answer read is one the
// script can give (a known outcome and load outcome).
func FuzzBeatAnswer(f *testing.F) {
	f.Add([]byte{3, 'i', 'i', 'i'}, int64(1_900_000_000_000), int64(2), "other")
	f.Add([]byte{7, 'i', 'i', 'i', 's', 'i', 'i', 'i'}, int64(1), int64(0), "")
	f.Add([]byte{6, 's', 'i', 'i', 's', 'i', 'i'}, int64(-1), int64(9), "x")
	f.Fuzz(func(t *testing.T, shape []byte, n, m int64, s string) {
		var v any = n
		if len(shape) > 0 {
			arr := make([]any, 0, int(shape[0])%9)
			for i := range cap(arr) {
				kind := byte('i')
				if i+1 < len(shape) {
					kind = shape[i+1]
				}
				switch {
				case kind == 's':
					arr = append(arr, s)
				case kind%2 == 0:
					arr = append(arr, n+int64(i))
				default:
					arr = append(arr, m-int64(i))
				}
			}
			v = arr
		}
		a, err := ParseBeatAnswer(v)
		if err != nil {
			return
		}
		if a.Outcome < 0 || a.Outcome > BeatTakenOver || a.Load < 0 || a.Load > LoadFailed {
			t.Fatalf("ParseBeatAnswer(%v) = %+v: an outcome the script never gives", v, a)
		}
	})
}
