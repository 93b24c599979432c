package datadriver

import (
	"fmt"
	"time"

	"github.com/klauspost/compress/zstd"
)

// History: a kept version is the data a write replaced, compressed (zstd)
// by this side (Lua cannot), in a hash beside the record (record.HistoryKey:
// its own key, in the record's slot). At most one version is kept per
// HistoryEvery, plus the data before each restore; History versions are
// kept in all. A save that keeps no version sends nothing more and does not
// touch the hash.

// historySlack: a version is sent this much before it is due by the
// driver's reckoning of the Redis clock; the script keeps it only when it is
// due by the Redis clock itself, else it is the next write's.
const historySlack = 5 * time.Second

// Blob formats of kept versions: a tag byte, then the payload.
const (
	blobZstd = 'z'
)

// versionDue reports whether the next data write should send the data it
// replaces to be kept. The caller holds the save slot.
func (p *Profile[T]) versionDue() bool {
	w := &p.w
	if p.d.cfg.History <= 0 || len(w.lastData) == 0 {
		return false
	}
	now := w.redisNow.Add(p.d.node.clock.Since(w.loadedAt)) // the Redis clock, reckoned
	return now.Sub(w.histAt) >= p.d.cfg.HistoryEvery-historySlack
}

// compress packs data for the history.
func (d *Driver[T]) compress(data []byte) []byte {
	return d.zenc.EncodeAll(data, []byte{blobZstd})
}

// decompress unpacks a kept version.
func (d *Driver[T]) decompress(blob []byte) ([]byte, error) {
	if len(blob) == 0 {
		return nil, fmt.Errorf("empty kept version")
	}
	switch blob[0] {
	case blobZstd:
		return d.zdec.DecodeAll(blob[1:], nil)
	}
	return nil, fmt.Errorf("kept version of unknown format %q", blob[0])
}

// newZstd returns the driver's compressor and decompressor: one goroutine
// each at most, closed with the driver.
func newZstd() (*zstd.Encoder, *zstd.Decoder, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return nil, nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		_ = enc.Close()
		return nil, nil, err
	}
	return enc, dec, nil
}
