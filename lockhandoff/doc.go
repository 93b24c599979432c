// Package lockhandoff lets a lock change hands between game servers as soon
// as its holder lets go or is proven stopped, and never by age while the
// holder lives.
//
// A Node runs one Handoff: one subscription on its own bus subject and one
// presence beat, whatever the number of drivers. Drivers register by name
// as Holders.
//
// A load that finds another server's lock opens a Wait. Wait.Next asks the
// holder to release the lock (a request naming the lock token it saw,
// repeated every RequestRepeat), parks 0.5 s doubling to 2 s, wakes at once
// on the holder's reply, and after each wake reads the holder's presence.
// Two reads at least one beat apart that both find the holder stopped prove
// it stopped: the next acquire may steal the lock, and the acquire script
// takes it only if the lock carries the presence flag and still names the
// token the joiner saw. A holder whose presence read alive keeps its lock
// even when the lock is older than the age limit.
//
// The holder routes a request to the driver of that name. A request that
// does not name the lock the driver holds now is answered and ignored (a
// late or forged request never ends a session); otherwise the driver ends
// the session (or retries a failed leave save) and replies once the profile
// is released.
package lockhandoff
