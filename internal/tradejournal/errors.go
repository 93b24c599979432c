package tradejournal

import "errors"

var (
	// ErrNotFound: no journal entry for that trade id.
	ErrNotFound = errors.New("trade journal entry not found")
	// ErrState: the entry is not in the state the move expects; the
	// *StateError says which it is in.
	ErrState = errors.New("trade journal entry in another state")
	// ErrCorrupt: the entry cannot be decoded.
	ErrCorrupt = errors.New("corrupt trade journal entry")
)

// StateError is a move refused because the entry is in another state. It
// matches ErrState.
type StateError struct {
	ID    string
	State State // the current state; "" when there is no entry
}

func (e *StateError) Error() string {
	s := string(e.State)
	if s == "" {
		s = "no entry"
	}
	return "trade " + e.ID + ": journal is " + s
}

// Is makes errors.Is(err, ErrState) true.
func (e *StateError) Is(target error) bool { return target == ErrState }
