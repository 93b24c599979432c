// Package record owns the Redis record of a profile: its key layout, its
// field names, and the Lua scripts that change it, each with one typed
// definition of its arguments and its answer.
//
// A profile is one Redis hash, "<ns>:{<driver>:<key>}" (the hash tag keeps
// it, and everything kept beside it, in one Redis Cluster slot). Lua never
// decodes the profile: the data field is an opaque blob, and the lock lives
// in plain fields beside it (see the Field constants).
//
// Every state change is one script and one round trip, fenced by the lock
// token, on the Redis clock (TIME):
//
//   - [Acquire] takes the lock, or answers who holds it ([Lock]); the rule of
//     who may take a lock lives in acquire.lua and nowhere else;
//   - [Save] writes data under the lock, releases it, or settles a trade
//     ([WriteMode]);
//   - [Prepare] marks a record as held by a trade;
//   - [Versions] lists kept versions, [Wipe] erases a record.
//
// Each script's arguments are a struct with a method that builds its ARGV
// and a parser that reads one back, and each answer is a struct with a named
// outcome: callers never read an answer by position or compare tags as
// strings. [Catalog] identifies the scripts on the wire by name, for tests
// and the simulation.
package record
