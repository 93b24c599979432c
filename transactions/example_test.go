package transactions_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/transactions"
)

// A participant's recovery that finds no journal entry aborts the trade
// with a tombstone, so its coordinator can no longer open or commit it.
func ExampleJournal_Abort() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	j := transactions.New(redis.NewClient(&redis.Options{Addr: mr.Addr()}), "mygame", 0)
	ctx := context.Background()

	fmt.Println(j.Abort(ctx, "trade-1"))
	fmt.Println(j.Commit(ctx, "trade-1"))
	// Output:
	// <nil>
	// trade trade-1: journal is ABORTED
}
