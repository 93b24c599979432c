// Package transactions reads the trade journal that datadriver's trades
// write: one Redis hash per trade, PREPARED -> COMMITTED or ABORTED, with
// each participant's post-trade image until every participant has it. How
// it keeps a trade all-or-nothing is in the docs' trades page (docs/trades.md).
package transactions
