package faulttest

// Player is the profile the gameserver plays: a coin counter and who last
// changed it. Every accepted Update adds one coin and stamps Writer and
// Epoch, so a record's data names the session that wrote it. With
// -messages every applied Gift adds to Gifts and counts its message id in
// Got, so the data itself shows how often each message was applied.
type Player struct {
	Coins  int
	Writer string // JobID of the server whose session last changed the data
	Epoch  int64  // lock epoch of that session

	Gifts int            // the Amounts of every applied Gift
	Got   map[string]int // message id → times applied (exactly once: 1)
}

// Gift is the body of a message the message scenario sends to a profile.
type Gift struct {
	Key    string // the profile it was sent to (OnMessage is not told)
	Seq    int64  // the sender's sequence number
	Amount int    // coins for Player.Gifts
}

// ApplyGift applies the gift of message id to the data. It counts, and
// never skips, an id applied before: a second application shows as 2 in
// Got, as a library that applied a message twice would leave it.
func (p *Player) ApplyGift(id string, g Gift) {
	if p.Got == nil {
		p.Got = make(map[string]int)
	}
	p.Got[id]++
	p.Gifts += g.Amount
}

// The kinds of Event a gameserver prints (Event.Ev).
const (
	// EvReady: the Node runs (presence beating); Job is set.
	EvReady = "ready"
	// EvJoinStart: Join was called for Key (after the concurrency slot).
	EvJoinStart = "join_start"
	// EvJoined: Join returned a profile: Epoch, Coins loaded, JoinNS, and
	// LockAtMS, the record's lock.at read right after (the acquire's Redis
	// time; 0 when the read failed or found another lock).
	EvJoined = "joined"
	// EvJoinFailed: Join returned Err.
	EvJoinFailed = "join_failed"
	// EvUpdate: one accepted Update (only with -log-updates): Sent before the
	// call, T after it, Coins after it.
	EvUpdate = "update"
	// EvSaved: Save returned nil: Coins is exactly the value it wrote, Sent
	// when Save was called.
	EvSaved = "saved"
	// EvSaveFailed: Save returned Err; Sent when it was called.
	EvSaveFailed = "save_failed"
	// EvEnded: the profile's Done channel closed (T is when it was seen),
	// with Err (Profile.Err) and the session's last accepted Update so far.
	// Sessions closed by SIGTERM's Node.Close are not reported.
	EvEnded = "ended"
	// EvRefused: an Update was refused with Err (Sent when it was called);
	// the session's loop stops. Carries the last accepted Update.
	EvRefused = "refused"
	// EvOnRelease: the profile's leave cleanup runs (a release or a handoff
	// to another server has begun).
	EvOnRelease = "on_release"
	// EvDump: every key's state (Keys), on stdin "dump" or SIGUSR1.
	EvDump = "dump"
	// EvClosed: Node.Close returned Err on SIGTERM; the process exits next.
	EvClosed = "closed"
	// EvKicked: the library ended Key's session by itself (Config.Kick),
	// for Reason (a KickReason's String).
	EvKicked = "kicked"
	// EvApplied: OnMessage applied the Gift of message Msg (Seq) to Key's
	// data (only with -messages). The change is saved, and the message
	// leaves the inbox, with the session's next save.
	EvApplied = "applied"
	// EvMoved: a MoveTo of the key (the "move <job>" command) answered nil;
	// Coins is the value the move carried (the session's last).
	EvMoved = "moved"
	// EvMoveFailed: a MoveTo answered an error (Err); the session is live.
	EvMoveFailed = "move_failed"
)

// Event is one JSON line a gameserver prints on stdout. Times are Unix
// nanoseconds of the wall clock, which every process on the machine shares.
type Event struct {
	T   int64  `json:"t"`
	Ev  string `json:"ev"`
	Job string `json:"job"`
	Key string `json:"key,omitempty"`
	Err string `json:"err,omitempty"`

	Epoch    int64  `json:"epoch,omitempty"`
	Coins    int    `json:"coins,omitempty"`
	Sent     int64  `json:"sent,omitempty"`
	JoinNS   int64  `json:"join_ns,omitempty"`
	LockAtMS int64  `json:"lock_at_ms,omitempty"`
	Reason   string `json:"reason,omitempty"` // EvKicked: the KickReason
	Msg      string `json:"msg,omitempty"`    // EvApplied: the message id
	Seq      int64  `json:"seq,omitempty"`    // EvApplied: the Gift's Seq

	// The last accepted Update of the session (EvEnded, EvRefused): when the
	// call began and returned, and how many the session accepted.
	LastBefore int64 `json:"last_before,omitempty"`
	LastAfter  int64 `json:"last_after,omitempty"`
	Updates    int64 `json:"updates,omitempty"`

	Keys []KeyState `json:"keys,omitempty"`
}

// KeyState is one key in an EvDump.
type KeyState struct {
	Key      string `json:"key"`
	Live     bool   `json:"live"`     // a session of the key is playing
	Sessions int    `json:"sessions"` // sessions joined so far
	Epoch    int64  `json:"epoch"`    // of the last session
	Coins    int    `json:"coins"`    // after the last accepted Update
	// The last accepted Update of any session of the key (before and after
	// the call), and the count over all sessions.
	LastBefore int64 `json:"last_before"`
	LastAfter  int64 `json:"last_after"`
	Updates    int64 `json:"updates"`
}
