package messaging

import "fmt"

// maxTraceParentBytes bounds a traceparent. Version 00 of W3C Trace Context
// is exactly 55 bytes; a later version may append fields, so it gets room to
// grow, but not so much that a hostile sender can fill a message with it.
const maxTraceParentBytes = 128

// maxTraceStateBytes bounds a tracestate: W3C Trace Context asks platforms
// to propagate at least 512 characters and lets them drop the rest.
const maxTraceStateBytes = 512

// traceParentV00Bytes is the length of a version 00 traceparent:
// "00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>".
const traceParentV00Bytes = 55

// validTraceParent reports whether s is a W3C Trace Context traceparent
// (https://www.w3.org/TR/trace-context/#traceparent-header) that a message
// can carry: "vv-<32 hex trace id>-<16 hex parent id>-<2 hex flags>" in
// lowercase hex, a version other than "ff", a trace id and a parent id that
// are not all zeros, exactly 55 bytes for version 00, and for a later version
// at most maxTraceParentBytes with anything after the flags starting with
// '-' and made of lowercase hex and '-'. The error wraps errInvalidTrace and
// says what is wrong.
func validTraceParent(s string) error {
	if reason := traceParentProblem(s); reason != "" {
		return fmt.Errorf("%w: traceparent %.64q: %s", errInvalidTrace, s, reason)
	}
	return nil
}

func traceParentProblem(s string) string {
	switch {
	case len(s) < traceParentV00Bytes:
		return fmt.Sprintf("%d bytes, want at least %d", len(s), traceParentV00Bytes)
	case len(s) > maxTraceParentBytes:
		return fmt.Sprintf("%d bytes, limit %d", len(s), maxTraceParentBytes)
	}
	// Where the trace id and the parent id start; the dashes are at 2, 35
	// and 52.
	const traceID, parentID = 3, 36
	for i := range len(s) {
		c := s[i]
		dash := i == 2 || i == 35 || i == 52 || (i >= traceParentV00Bytes && c == '-')
		switch {
		case dash && c != '-':
			return fmt.Sprintf("byte %d is %q, want '-'", i, c)
		case !dash && !isLowerHex(c):
			return fmt.Sprintf("byte %d is %q, want lowercase hex", i, c)
		}
	}
	switch {
	case s[:2] == "ff":
		return "version ff is invalid"
	case s[:2] == "00" && len(s) != traceParentV00Bytes:
		return fmt.Sprintf("version 00 is %d bytes, got %d", traceParentV00Bytes, len(s))
	case len(s) > traceParentV00Bytes && s[traceParentV00Bytes] != '-':
		return fmt.Sprintf("byte %d is %q, want '-' after the flags", traceParentV00Bytes, s[traceParentV00Bytes])
	case allZeros(s[traceID : traceID+32]):
		return "trace id is all zeros"
	case allZeros(s[parentID : parentID+16]):
		return "parent id is all zeros"
	}
	return ""
}

// validTraceState reports whether s can travel as a W3C tracestate: at most
// maxTraceStateBytes bytes of printable ASCII (0x20 to 0x7e), not empty. It
// does not parse the list members; the tracer that reads it does. The error
// wraps errInvalidTrace and says what is wrong.
func validTraceState(s string) error {
	reason := ""
	switch {
	case s == "":
		reason = "empty"
	case len(s) > maxTraceStateBytes:
		reason = fmt.Sprintf("%d bytes, limit %d", len(s), maxTraceStateBytes)
	default:
		for i := range len(s) {
			if c := s[i]; c < 0x20 || c > 0x7e {
				reason = fmt.Sprintf("byte %d is %q, want printable ASCII", i, c)
				break
			}
		}
	}
	if reason != "" {
		return fmt.Errorf("%w: tracestate %.64q: %s", errInvalidTrace, s, reason)
	}
	return nil
}

func isLowerHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

func allZeros(s string) bool {
	for i := range len(s) {
		if s[i] != '0' {
			return false
		}
	}
	return true
}
