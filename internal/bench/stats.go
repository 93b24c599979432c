package bench

import (
	"math"
	"slices"
	"time"
)

// Latency summarises latencies, in milliseconds.
type Latency struct {
	N      int     `json:"n"`
	P50MS  float64 `json:"p50_ms"`
	P90MS  float64 `json:"p90_ms"`
	P99MS  float64 `json:"p99_ms"`
	MaxMS  float64 `json:"max_ms"`
	MeanMS float64 `json:"mean_ms"`
}

// summarize summarises samples (ms); they are sorted in place.
func summarize(samples []float64) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	slices.Sort(samples)
	var sum float64
	for _, s := range samples {
		sum += s
	}
	return Latency{
		N:      len(samples),
		P50MS:  round3(quantile(samples, 0.50)),
		P90MS:  round3(quantile(samples, 0.90)),
		P99MS:  round3(quantile(samples, 0.99)),
		MaxMS:  round3(samples[len(samples)-1]),
		MeanMS: round3(sum / float64(len(samples))),
	}
}

// quantile is the nearest-rank q-quantile of sorted samples.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// median is the median of vs (the mean of the middle two for an even
// count); vs is not changed.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// msOf converts a duration to milliseconds, for samples.
func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ratio is a / b, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// round3 rounds to three decimals (µs for milliseconds).
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// round1 rounds to one decimal.
func round1(v float64) float64 { return math.Round(v*10) / 10 }
