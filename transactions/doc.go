// Package transactions reads the trade journal: one Redis hash per trade,
// which moves PREPARED -> COMMITTED or PREPARED -> ABORTED and holds each
// participant's post-trade image until every participant has it. Trades are
// made with datadriver's Trade; whoever next loads a participant finishes
// one after a crash. How the journal keeps a trade all-or-nothing is in the
// trades page of the docs (docs/trades.md).
package transactions
