package datadriver

import (
	"crypto/sha256"
	"errors"

	"github.com/ckernel/playerdata/internal/checksum"
	"github.com/ckernel/playerdata/internal/record"
)

// storedData is what a profile's executor knows of the data stored in its
// record: not the bytes (a resident profile would hold its data twice,
// decoded and encoded), only what its writes need of them. Whether a
// snapshot changed the data is a comparison of digests; the checksum of a
// write that leaves the data as stored runs on from sum; the data a kept
// version needs is read from the record when a version is due (once per
// HistoryEvery, beside the history's listing).
type storedData struct {
	// digest is the first half of the data's SHA-256: two different
	// encodings share it with a chance of 2^-128.
	digest [16]byte
	// sum is the record checksum run over the data (record.DataSum).
	sum checksum.Running
	// n is the data's length; 0: the record stores no data.
	n int
}

// storedOf is what the executor keeps of data, as stored.
func storedOf(data []byte) storedData {
	if len(data) == 0 {
		return storedData{sum: record.DataSum(nil)}
	}
	full := sha256.Sum256(data)
	s := storedData{sum: record.DataSum(data), n: len(data)}
	copy(s.digest[:], full[:])
	return s
}

// same reports whether data is the stored data.
func (s storedData) same(data []byte) bool {
	if len(data) != s.n {
		return false
	}
	if s.n == 0 {
		return true
	}
	full := sha256.Sum256(data)
	return [16]byte(full[:16]) == s.digest
}

// errStoredDataChanged: the data read for a kept version is not the data
// the executor's last landed write left (another writer wrote the record:
// the write that keeps it will be refused by its fence too).
var errStoredDataChanged = errors.New("the stored data is not the data of the last landed write")
