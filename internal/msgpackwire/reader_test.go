package msgpackwire

import (
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestSkipPassesOneValue: Skip stops right after the value it began on,
// whatever nests inside, and refuses input that ends inside it or claims
// more than it holds.
func TestSkipPassesOneValue(t *testing.T) {
	nested, err := msgpack.Marshal(map[string]any{"a": []any{1, "x", 2.5, []byte{1}}, "b": map[string]int{"c": -300}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		in      []byte
		wantErr error
	}{
		{"nested map", nested, nil},
		{"fixext", []byte{0xd4, 0x05, 0xaa}, nil},
		{"cut short", nested[:len(nested)-1], ErrTruncated},
		{"array claiming more than the input", []byte{0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0}, ErrTruncated},
		{"string claiming more than the input", []byte{0xdb, 0xff, 0xff, 0xff, 0xff, 'a'}, ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			if tc.wantErr == nil {
				in = append(append([]byte{}, in...), 0x07) // a value after it
			}
			r := Reader{B: in}
			_, err := r.Skip()
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Skip: %v, want %v", err, tc.wantErr)
			}
			if err == nil && r.Off != len(tc.in) {
				t.Fatalf("Skip stopped at %d, want %d", r.Off, len(tc.in))
			}
		})
	}
	r := Reader{B: []byte{0x91, 0xc1}}
	var ce *CodeError
	if _, err := r.Skip(); !errors.As(err, &ce) || ce.Code != 0xc1 {
		t.Fatalf("Skip over 0xc1: %v, want a *CodeError", err)
	}
}

// TestReadsEveryIntegerForm: Integer reads each msgpack integer form as
// msgpack wrote it, and names both types when the value is no integer.
func TestReadsEveryIntegerForm(t *testing.T) {
	for _, v := range []int64{0, 1, 127, 128, 255, 256, 65535, 65536, 1 << 40, -1, -32, -33, -128, -129, -32768, -32769, -1 << 40} {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		r := Reader{B: b}
		c, _ := r.Code()
		u, neg, err := r.Integer(c, "an int")
		if err != nil || int64(u) != v || neg != (v < 0) || r.Left() != 0 {
			t.Fatalf("Integer(% x) = %d, %v, %v; want %d", b, int64(u), neg, err, v)
		}
	}
	r := Reader{B: []byte{0xa1, 'x'}}
	c, _ := r.Code()
	if _, _, err := r.Integer(c, "an int"); err == nil || err.Error() != "msgpack str into an int" {
		t.Fatalf("Integer of a str: %v", err)
	}
}
