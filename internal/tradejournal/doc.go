// Package tradejournal is the trade journal: one Redis hash per trade id (its
// own Cluster slot) that moves PREPARED -> COMMITTED or PREPARED -> ABORTED,
// each move one compare-and-set script. It holds the coordinator's JobID,
// each participant's driver, key, lock token and record version at prepare,
// and each participant's post-trade data image, so that whoever next loads a
// participant can finish the trade after a crash: write the image if the
// trade committed, drop the mark otherwise.
//
// The commit point is the single CAS PREPARED -> COMMITTED. A participant's
// recovery that finds no entry, or a PREPARED one, aborts it by CAS first, so
// the coordinator can never commit a trade a recovery has given up. An
// ABORTED entry expires after Retain; a COMMITTED one once every participant
// is marked settled, then after Retain.
//
// Every step touches one key; the record side of a trade (the mark on each
// profile record and the settle write) lives in package datadriver. Package
// transactions is its public, read-only face.
package tradejournal
