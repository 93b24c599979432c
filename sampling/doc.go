// Package sampling has the trace sampler for playerdata's spans: KeepWaits,
// which keeps every join that had to wait (and every move), whatever share
// of other traces the application keeps. A head sampler decides before a
// join knows it will wait; playerdata marks a join that waits (WaitKey, on a
// stand-in root span when the join was not sampled), and KeepWaits samples
// what carries the mark. Install it on every server's TracerProvider (the
// operations page of the docs, docs/operations.md, shows how).
//
// This package imports the OTel SDK; the rest of playerdata uses only the
// OTel API.
package sampling
