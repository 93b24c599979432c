package enum

import "testing"

func TestName(t *testing.T) {
	type color uint8
	type signed int
	for _, tc := range []struct {
		got    func() (string, bool)
		want   string
		wantOK bool
	}{
		{func() (string, bool) { return Name(color(0), "red", "green") }, "red", true},
		{func() (string, bool) { return Name(color(1), "red", "green") }, "green", true},
		{func() (string, bool) { return Name(color(2), "red", "green") }, "", false},
		{func() (string, bool) { return Name(color(255), "red", "green") }, "", false},
		{func() (string, bool) { return Name(signed(-1), "red", "green") }, "", false},
		{func() (string, bool) { return Name(signed(0), "", "first") }, "", false},
		{func() (string, bool) { return Name(signed(1), "", "first") }, "first", true},
	} {
		if name, ok := tc.got(); name != tc.want || ok != tc.wantOK {
			t.Errorf("got %q, %v; want %q, %v", name, ok, tc.want, tc.wantOK)
		}
	}
}
