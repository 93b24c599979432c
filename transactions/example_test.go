package transactions_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/transactions"
)

// An operator looks up the trade a player reports: its state, who made it,
// and which participants have their post-trade image.
func ExampleJournal_Read() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	j := transactions.New(redis.NewClient(&redis.Options{Addr: mr.Addr()}), "mygame")

	e, err := j.Read(context.Background(), "trade-1")
	switch {
	case errors.Is(err, transactions.ErrNotFound):
		fmt.Println("no entry at", j.Key("trade-1"))
	case err != nil:
		fmt.Println(err)
	default:
		fmt.Println(e.State, e.Coordinator, e.Settled)
	}
	// Output:
	// no entry at mygame:trade:{trade-1}
}
