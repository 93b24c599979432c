package messaging

import (
	"errors"
	"strings"
	"testing"
)

func TestValidTraceParent(t *testing.T) {
	const (
		traceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
		parentID = "00f067aa0ba902b7"
	)
	tests := []struct {
		name string
		s    string
		ok   bool
	}{
		{"w3c example", "00-" + traceID + "-" + parentID + "-01", true},
		{"not sampled", "00-" + traceID + "-" + parentID + "-00", true},
		{"later version, same length", "01-" + traceID + "-" + parentID + "-01", true},
		{"later version, more fields", "cc-" + traceID + "-" + parentID + "-01-0a-bc12", true},
		{"later version, at the limit", "cc-" + traceID + "-" + parentID + "-01-" + strings.Repeat("a", maxTraceParentBytes-56), true},
		{"later version, over the limit", "cc-" + traceID + "-" + parentID + "-01-" + strings.Repeat("a", maxTraceParentBytes-55), false},
		{"later version, junk after the flags", "cc-" + traceID + "-" + parentID + "-01x", false},
		{"later version, uppercase after the flags", "cc-" + traceID + "-" + parentID + "-01-AB", false},
		{"empty", "", false},
		{"version ff", "ff-" + traceID + "-" + parentID + "-01", false},
		{"version 00 with more fields", "00-" + traceID + "-" + parentID + "-01-00", false},
		{"uppercase hex", "00-" + strings.ToUpper(traceID) + "-" + parentID + "-01", false},
		{"zero trace id", "00-" + strings.Repeat("0", 32) + "-" + parentID + "-01", false},
		{"zero parent id", "00-" + traceID + "-" + strings.Repeat("0", 16) + "-01", false},
		{"short trace id", "00-" + traceID[1:] + "-" + parentID + "-01", false},
		{"missing dash", "00" + traceID + "-" + parentID + "-01x", false},
		{"underscore for dash", "00-" + traceID + "_" + parentID + "-01", false},
		{"space", "00-" + traceID + "-" + parentID + "- 1", false},
		{"non-ascii", "00-" + traceID + "-" + parentID + "-0é"[:55-52], false},
		{"one byte short", ("00-" + traceID + "-" + parentID + "-01")[:54], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validTraceParent(tt.s)
			if tt.ok && err != nil {
				t.Fatalf("validTraceParent(%q) = %v, want nil", tt.s, err)
			}
			if !tt.ok && !errors.Is(err, errInvalidTrace) {
				t.Fatalf("validTraceParent(%q) = %v, want errInvalidTrace", tt.s, err)
			}
		})
	}
}

func TestValidTraceState(t *testing.T) {
	tests := []struct {
		name string
		s    string
		ok   bool
	}{
		{"w3c example", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", true},
		{"multi-tenant key and spaces", "fw529a3039@dt=ZmY4Y2M1, congo=t61rcWkgMzE", true},
		{"at the limit", strings.Repeat("a", maxTraceStateBytes), true},
		{"over the limit", strings.Repeat("a", maxTraceStateBytes+1), false},
		{"empty", "", false},
		{"tab", "a=b\tc", false},
		{"newline", "a=b\n", false},
		{"nul", "a=\x00", false},
		{"del", "a=\x7f", false},
		{"non-ascii", "a=é", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validTraceState(tt.s)
			if tt.ok && err != nil {
				t.Fatalf("validTraceState(%q) = %v, want nil", tt.s, err)
			}
			if !tt.ok && !errors.Is(err, errInvalidTrace) {
				t.Fatalf("validTraceState(%q) = %v, want errInvalidTrace", tt.s, err)
			}
		})
	}
}
