package record

import (
	"strings"
	"testing"
)

// TestScriptsIncludeOnlyKnownParts: a part is pasted in whole where its
// include line was, a script without includes is sent as written, and an
// unknown part is refused (the package's own scripts load, so theirs are
// known: an include left as a comment would leave now or isint undefined,
// which every acquire and save test runs into).
func TestScriptsIncludeOnlyKnownParts(t *testing.T) {
	got := expandLua("local t = redis.call('TIME')\n--#include nowms\nreturn now\n")
	if !strings.Contains(got, nowMSPart) || !strings.HasSuffix(got, "return now\n") ||
		!strings.HasPrefix(got, "local t = redis.call('TIME')\n") {
		t.Errorf("expanded:\n%s", got)
	}
	if src := "return 1\n"; expandLua(src) != src {
		t.Error("a script without includes changed")
	}
	defer func() {
		if recover() == nil {
			t.Error("an unknown part was pasted as nothing")
		}
	}()
	expandLua("--#include nosuchpart\n")
}
