// Package handoffcore lets a lock change hands between game servers as soon
// as its holder lets go or is proven stopped, and never by age while the
// holder lives.
//
// A Node runs one Handoff: one subscription on its own bus subject, whatever
// the number of drivers. Each driver registers a [ReleaseFunc] under its
// name. (Beating this server's own presence is the Node's business; a
// Handoff only reads other servers' presence.)
//
// A load that finds another server's lock opens a [Wait]. Wait.Next asks the
// holder to release the lock (a request naming the lock token it saw,
// repeated every RequestRepeat), parks 0.5 s doubling to 2 s, wakes at once
// on the holder's reply, and after a park reads the holder's presence. Two
// stopped reads at least one beat apart prove it stopped; the proof is kept
// per Node and shared by every wait on that holder's locks, so a crashed
// server is proven stopped once, not once per key. The next acquire may then
// take a presence-flagged lock of that holder last written before the
// proving read (a live server writes only under its presence lease, which
// ends before its beat expires). A holder whose presence reads alive keeps
// its lock, even past the age limit.
//
// The holder routes a request to the driver of that name. A request that
// does not name the lock the driver holds now is answered and ignored (a
// late or forged request never ends a session); otherwise the driver ends
// the session (or retries a failed leave save) and its ReleaseFunc's channel
// closes once the profile is released, when the Handoff replies. The driver
// never learns who asked.
package handoffcore
