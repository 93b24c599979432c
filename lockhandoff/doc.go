// Package lockhandoff lets a lock on a profile change hands between game
// servers as soon as its holder lets go, or once two presence reads prove
// the holder stopped, and never by age while the holder lives.
//
// A server runs one [Handoff]: a holder registers a [ReleaseFunc] per
// driver, and a server that finds a lock held elsewhere opens a [Wait]. A
// datadriver Node runs its own; use this package for locks of your own
// records. The protocol is in the docs' handoff page (docs/handoff.md).
package lockhandoff
