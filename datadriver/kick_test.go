package datadriver_test

import (
	"testing"

	"github.com/ckernel/playerdata/datadriver"
)

// Every kick reason has its own identifier and sentence: a game that
// switches on the reason, or logs it, never confuses two causes.
func TestKickReasonsAreDistinct(t *testing.T) {
	reasons := []datadriver.KickReason{datadriver.ReasonJoinedElsewhere, datadriver.ReasonLockLost,
		datadriver.ReasonFenced, datadriver.ReasonWiped, datadriver.ReasonShutdown, datadriver.ReasonCallbackFailed,
		datadriver.ReasonRecordGone, datadriver.ReasonRecordCorrupt, datadriver.ReasonRestored}
	ids, messages := map[string]bool{}, map[string]bool{}
	for _, r := range reasons {
		id, msg := r.String(), r.Message()
		if ids[id] || messages[msg] {
			t.Errorf("%d: identifier %q or sentence %q is shared with another reason", int(r), id, msg)
		}
		ids[id], messages[msg] = true, true
		if id == "" || msg == "You were disconnected." {
			t.Errorf("%d: no identifier or sentence of its own (%q, %q)", int(r), id, msg)
		}
	}
	if got := datadriver.KickReason(0).String(); got != "KickReason(0)" {
		t.Errorf("the zero reason prints %q", got)
	}
}
