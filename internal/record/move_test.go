package record

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

func TestMoveArgsRoundTrip(t *testing.T) {
	for _, a := range []MoveArgs{
		{Token: "src", Expiry: time.UnixMilli(1_700_000_000_123), To: "server-b", ToToken: "dst", ToPresence: true, ID: "m1",
			From: "server-a", Data: []byte("\x81\xa1C\x05"), Schema: 2, SchemaMin: 1, Sum: "0badf00d",
			Meta: &Meta{UserIDs: []byte("u"), Meta: []byte("m")}, Applied: []string{"1-0", "2-0"}},
		{Token: "src", Expiry: time.UnixMilli(5), To: "b", ToToken: "t", ID: "m2", From: "a"},
	} {
		c := a.Call("rec")
		argv := make([]string, len(c.Call.Args))
		for i, v := range c.Call.Args {
			switch x := v.(type) {
			case []byte:
				argv[i] = string(x)
			default:
				argv[i] = fmt.Sprint(x)
			}
		}
		got, err := ParseMoveArgs(argv)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, a) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, a)
		}
		if want := []string{"rec", InboxKey("rec"), TriesKey("rec")}; !reflect.DeepEqual(c.Call.Keys, want) {
			t.Fatalf("keys %v, want %v", c.Call.Keys, want)
		}
	}
	if _, err := ParseMoveArgs([]string{"x"}); err == nil {
		t.Fatal("a short call parsed")
	}
}
