package datacodec

import (
	"bytes"

	"github.com/vmihailenco/msgpack/v5"
)

// msgpackMarshalSorted is msgpack.Marshal with map keys sorted where
// msgpack can (map[string]any): records as another writer would make them.
func msgpackMarshalSorted(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
