//go:build !race

package bench

// raceDetector says the race detector is on (only ever in tests): it slows
// every goroutine several times over, so the flood is scaled down with the
// servers (see floodRate).
const raceDetector = false
