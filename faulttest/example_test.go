package faulttest_test

import (
	"encoding/json"
	"fmt"

	"github.com/ckernel/playerdata/faulttest"
)

// A gameserver prints one JSON Event per line; a scenario reads them back.
// ApplyGift counts every application of a message in the data itself, so a
// message applied twice would show as 2.
func ExampleEvent() {
	line := `{"t":1764590000000000000,"ev":"applied","job":"a","key":"p003","msg":"1764590000000-0","seq":7}`
	var e faulttest.Event
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		panic(err)
	}
	var p faulttest.Player
	p.ApplyGift(e.Msg, faulttest.Gift{Key: e.Key, Seq: e.Seq, Amount: 5})
	fmt.Println(e.Ev == faulttest.EvApplied, e.Job, e.Key, p.Gifts, p.Got[e.Msg])
	// Output: true a p003 5 1
}
