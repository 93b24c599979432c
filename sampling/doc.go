// Package sampling has the trace sampler for playerdata's spans: KeepWaits,
// which keeps every join that had to wait, whatever share of other traces
// the application keeps.
//
// # Why a sampler of its own
//
// A head sampler decides whether a span is kept when the span starts. A
// join starts before anyone knows whether it will wait, so a sampler that
// keeps 1 % of traces keeps 1 % of the joins that waited too, and those are
// where the hardest bugs live (handoffs, takeovers, refusals). So when a
// join turns out to wait, playerdata marks it: a sampled join span gets
// playerdata.wait=true (WaitKey); an unsampled one gets a stand-in, a new
// root span of the same name ("join <driver>"), backdated to the join's
// start, linked to the join span and carrying playerdata.wait=true from its
// start. KeepWaits samples every span that starts with that attribute,
// whatever its parent says, and leaves every other decision to the sampler
// it wraps. The wait's children then follow their sampled parent (as
// sdktrace.ParentBased does), on this server and, through the traceparent
// a release request carries, on the server holding the lock: a join that
// waited is traced whole, on both servers, at any base rate.
//
// # Installing it
//
// The application builds its OTel SDK TracerProvider with the sampler and
// hands it to its Node (datadriver.NodeConfig.TracerProvider, or
// otel.SetTracerProvider for the global one):
//
//	tp := sdktrace.NewTracerProvider(
//		sdktrace.WithSampler(sampling.KeepWaits(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01)))),
//		sdktrace.WithBatcher(exporter),
//	)
//	node, err := datadriver.NewNode(ctx, datadriver.NodeConfig{..., TracerProvider: tp})
//
// Every server of a deployment should install it: a holder whose sampler
// drops the release request's span breaks the trace there (ParentBased
// follows the requester's decision, which is sampled).
//
// This package imports the OTel SDK (go.opentelemetry.io/otel/sdk/trace);
// the rest of playerdata uses only the OTel API, so a game that installs no
// SDK does not link it.
package sampling
