package record

import (
	"testing"
	"time"
)

func TestLockSince(t *testing.T) {
	cases := []struct {
		field string
		epoch int64
		want  time.Time
	}{
		{"7,1700000000123", 7, time.UnixMilli(1700000000123)},
		{"6,1700000000123", 7, time.Time{}}, // stamped before an older build took the lock
		{"", 7, time.Time{}},
		{"7", 7, time.Time{}},
		{"7,abc", 7, time.Time{}},
		{"7,-5", 7, time.Time{}},
	}
	for _, tc := range cases {
		if got := LockSince(tc.field, tc.epoch); !got.Equal(tc.want) {
			t.Errorf("LockSince(%q, %d) = %v, want %v", tc.field, tc.epoch, got, tc.want)
		}
	}
}
