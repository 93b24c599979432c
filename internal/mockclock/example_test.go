package mockclock_test

import (
	"fmt"
	"time"

	"github.com/ckernel/playerdata/internal/mockclock"
)

func Example() {
	c := mockclock.New()
	tk := c.Ticker(3 * time.Second)
	defer tk.Stop()
	c.Add(3 * time.Second)
	fmt.Println((<-tk.C).Sub(time.Unix(0, 0)))
	// Output: 3s
}
