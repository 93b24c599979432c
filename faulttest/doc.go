// Package faulttest proves playerdata's promises on real processes: real
// redis-server and nats-server processes, and game servers that are separate
// OS processes (the gameserver command in ./gameserver), killed with -9,
// paused with SIGSTOP, cut from Redis through a TCP proxy, while Redis and
// NATS are killed, shut down and restarted under them.
//
// It is a test rig: only this repository's tests and its gameserver command
// use it, it is not part of the library's API, and a game server never
// imports it.
//
// The package itself only holds what the gameserver and the tests share: the
// Player it plays, the Gift messages it applies (with -messages), and the
// JSON Event lines it prints. The scenarios are its tests; TestMain builds
// the gameserver once (set PLAYERDATA_GAMESERVER to a built binary to skip
// that). They need redis-server and nats-server on PATH and skip without
// them; they never use REDIS_URL or NATS_URL, nor the machine's usual ports.
//
//	go test ./faulttest/                    # every scenario, four at a time (about a minute, plus the build)
//	go test ./faulttest/ -run TestKill -v   # one scenario, with its figures
//
// Each scenario logs one line starting with "README |": a row of the "Faults
// we test" table (scenario, figures, the promise it checks).
package faulttest
