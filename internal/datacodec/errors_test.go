package datacodec

import (
	"errors"
	"testing"
)

type Narrow struct {
	Small int8
	Count uint16
}

// TestDecodeErrorsNameTheField: a stored value that does not fit T fails
// with a *FieldError whose Path names it by its stored names.
func TestDecodeErrorsNameTheField(t *testing.T) {
	c1 := mustNew(t, PlayerV1{}, Options{})
	cn := mustNew(t, Narrow{}, Options{})
	good := mustEncode(t, c1, PlayerV1{Coins: 1, Settings: SettingsV1{Volume: 2}}, nil)
	tests := []struct {
		name   string
		decode func() error
		path   string
		is     error
	}{
		{"string where T has an int", decodeWith(c1, marshal(t, map[string]any{"Settings": map[string]any{"Volume": "loud"}})),
			"Settings.Volume", ErrTypeMismatch},
		{"inside a map entry", decodeWith(c1, marshal(t, map[string]any{"Inventory": map[string]any{"sword": map[string]any{"Level": "max"}}})),
			`Inventory["sword"].Level`, ErrTypeMismatch},
		{"inside a map entry behind a pointer", decodeWith(c1, marshal(t, map[string]any{"Slots": map[int]any{3: map[string]any{"Count": []int{1}}}})),
			"Slots[3].Count", ErrTypeMismatch},
		{"inside a slice element", decodeWith(c1, marshal(t, map[string]any{"Quests": []any{map[string]any{}, map[string]any{"Step": "x"}}})),
			"Quests[1].Step", ErrTypeMismatch},
		{"a field whose type changed (a migration's job)", decodeWith(c1, marshal(t, map[string]any{"Settings": 5})),
			"Settings", ErrTypeMismatch},
		{"a map key of the wrong type", decodeWith(c1, marshal(t, map[string]any{"Slots": map[string]any{"x": nil}})),
			"Slots{key 0}", ErrTypeMismatch},
		{"overflow", decodeWith(cn, marshal(t, map[string]any{"Small": 300})), "Small", ErrTypeMismatch},
		{"negative into unsigned", decodeWith(cn, marshal(t, map[string]any{"Count": -1})), "Count", ErrTypeMismatch},
		{"not a map at the top", decodeWith(c1, marshal(t, "hello")), "", ErrTypeMismatch},
		{"truncated", decodeWith(c1, good[:len(good)-3]), "Loadout[1]", ErrMalformed},
		{"truncated inside an unknown field", decodeWith(c1, []byte{0x81, 0xa4, 'G', 'e', 'm', 's', 0xcd, 0x01}), "Gems", ErrMalformed},
		{"bytes after the value", decodeWith(c1, append(append([]byte{}, good...), 0xc0)), "", ErrMalformed},
		{"empty, not nil", decodeWith(c1, []byte{}), "", ErrMalformed},
		{"invalid code", decodeWith(c1, []byte{0x81, 0xa1, 'x', 0xc1}), "x", ErrMalformed},
		{"a count the input cannot hold", decodeWith(c1, []byte{0x81, 0xa6, 'Q', 'u', 'e', 's', 't', 's', 0xdd, 0xff, 0xff, 0xff, 0xff}), "Quests", ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.decode()
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("%v is not a *FieldError", err)
			}
			if fe.Path != tt.path || !errors.Is(err, tt.is) {
				t.Fatalf("%v: path %q, want %q and %v", err, fe.Path, tt.path, tt.is)
			}
		})
	}
}

func decodeWith[T any](c *Codec[T], b []byte) func() error {
	return func() error {
		_, _, err := c.Decode(b, 0)
		return err
	}
}
