package sampling

import (
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/ckernel/playerdata/internal/telemetry"
)

// WaitKey is the attribute that marks a join that waited: true from the
// start on the span KeepWaits always samples (the stand-in of an unsampled
// join), and set on a sampled join span once it waits. A tail sampler (an
// OTel Collector's tail_sampling processor) can keep traces on it too.
const WaitKey = telemetry.WaitKey

// KeepWaits returns a sampler that records and samples every span started
// with the attribute playerdata.wait=true (WaitKey) or playerdata.move=true
// (MoveKey: every move), even under an
// unsampled parent, keeping the parent's tracestate, and asks base about
// every other span. A nil base is sdktrace.ParentBased(sdktrace.AlwaysSample()),
// the SDK's default.
func KeepWaits(base sdktrace.Sampler) sdktrace.Sampler {
	if base == nil {
		base = sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
	return keepWaits{base: base}
}

// keepWaits is the sampler KeepWaits returns.
type keepWaits struct{ base sdktrace.Sampler }

var _ sdktrace.Sampler = keepWaits{}

// MoveKey is the attribute that marks the span of a move
// (Profile.MoveTo), true from its start: KeepWaits samples every move.
const MoveKey = telemetry.MoveKey

// ShouldSample samples a span marked as a wait or a move, else asks the
// base sampler.
func (s keepWaits) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	for _, a := range p.Attributes {
		if (a.Key == WaitKey || a.Key == MoveKey) && a.Value.AsBool() {
			return sdktrace.SamplingResult{
				Decision:   sdktrace.RecordAndSample,
				Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState(),
			}
		}
	}
	return s.base.ShouldSample(p)
}

// Description names the sampler and its base: "KeepWaits{<base>}".
func (s keepWaits) Description() string {
	return "KeepWaits{" + s.base.Description() + "}"
}
