// Package sampling has the trace sampler that keeps every join that waited.
//
// A head sampler decides whether a span is kept when the span starts. A join
// starts before anyone knows whether it will wait, so a sampler that keeps 1
// % of traces keeps 1 % of the joins that waited too, and those are where the
// hardest bugs live (handoffs, takeovers, refusals). When a join turns out to
// wait, telemetry.Driver.StartWait marks it: a sampled join span gets
// playerdata.wait=true; an unsampled one gets a stand-in, a new root span
// with the same name, backdated to the join's start, linked to the join span
// and carrying playerdata.wait=true from its start. KeepWaits samples every
// span that starts with that attribute, whatever its parent says, and leaves
// every other decision to the sampler it wraps; the wait's children then
// follow their sampled parent (ParentBased), on this server and, through
// the traceparent a release request carries, on the holder.
//
// This package imports the OTel SDK (go.opentelemetry.io/otel/sdk/trace);
// package telemetry does not, so a game that installs no SDK does not link
// it. The application installs the sampler:
//
//	tp := sdktrace.NewTracerProvider(
//		sdktrace.WithSampler(sampling.KeepWaits(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01)))),
//		sdktrace.WithBatcher(exporter),
//	)
package sampling

import (
	"github.com/ckernel/playerdata/internal/telemetry"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// KeepWaits returns a sampler that records and samples every span started
// with the attribute playerdata.wait=true (telemetry.WaitKey), even under an
// unsampled parent, and asks base about every other span. A nil base is
// sdktrace.ParentBased(sdktrace.AlwaysSample()), the SDK's default.
func KeepWaits(base sdktrace.Sampler) sdktrace.Sampler {
	if base == nil {
		base = sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
	return keepWaits{base: base}
}

// keepWaits is the sampler KeepWaits returns.
type keepWaits struct{ base sdktrace.Sampler }

// ShouldSample samples a span marked as a wait, else asks the base sampler.
func (s keepWaits) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	for _, a := range p.Attributes {
		if a.Key == telemetry.WaitKey && a.Value.AsBool() {
			return sdktrace.SamplingResult{
				Decision:   sdktrace.RecordAndSample,
				Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState(),
			}
		}
	}
	return s.base.ShouldSample(p)
}

// Description names the sampler and its base.
func (s keepWaits) Description() string {
	return "KeepWaits{" + s.base.Description() + "}"
}
