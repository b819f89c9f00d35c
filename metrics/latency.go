package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// RequestBuckets are the upper bounds, in seconds, of
// leaf_http_request_duration_seconds, ascending.
func RequestBuckets() []float64 { return slices.Clone(requestBuckets) }

// RequestLatency reads leaf_http_request_duration_seconds summed over the
// routes include accepts (every route when include is nil): it returns dst
// with one cumulative count per RequestBuckets bound (the requests that
// took at most that long) and last the count of all of them. Differences
// between two reads give the latencies of the requests in between, without
// any cost on the request path beyond the histogram's own; a read walks
// every (route, code) series, so it is meant for a sampler, about once a
// second.
func (m *Metrics) RequestLatency(include func(route string) bool, dst []uint64) []uint64 {
	n := len(requestBuckets) + 1
	dst = slices.Grow(dst[:0], n)[:n]
	clear(dst)
	ch := make(chan prometheus.Metric, 64)
	go func() {
		m.requests.Collect(ch)
		close(ch)
	}()
	var d dto.Metric
	for metric := range ch {
		d.Reset()
		if metric.Write(&d) != nil || !routeIncluded(&d, include) {
			continue
		}
		h := d.GetHistogram()
		for i, b := range h.GetBucket() {
			if i < len(requestBuckets) {
				dst[i] += b.GetCumulativeCount()
			}
		}
		dst[len(requestBuckets)] += h.GetSampleCount()
	}
	return dst
}

func routeIncluded(d *dto.Metric, include func(string) bool) bool {
	if include == nil {
		return true
	}
	for _, l := range d.GetLabel() {
		if l.GetName() == "route" {
			return include(l.GetValue())
		}
	}
	return false
}
