package handoffcore

// The bounds, for the tests that check them.
const (
	MaxPendingReplies    = maxPendingReplies
	MaxRepliedRequesters = maxRepliedRequesters
	PublishQueueLen      = publishQueueLen
	PublishWorkers       = publishWorkers
)
