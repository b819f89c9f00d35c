package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/leafgo/leaf/client"
)

// Summary is the result of a run. Its JSON form is what leaf bench --json
// prints.
type Summary struct {
	Transport         string       `json:"transport"` // "http", "grpc", or "client" (Config.Servers)
	Target            string       `json:"target"`
	Zone              string       `json:"zone,omitempty"`    // Config.Zone
	Servers           []Server     `json:"servers,omitempty"` // Config.Servers: where the requests went
	Mode              string       `json:"mode"`
	Tag               string       `json:"tag"`
	Count             int          `json:"count"`
	Concurrency       int          `json:"concurrency"`
	Rate              int          `json:"rate,omitempty"`   // Config.Rate, requests per second
	DurationSeconds   float64      `json:"duration_seconds"` // asked for
	ElapsedSeconds    float64      `json:"elapsed_seconds"`  // until the last request ended
	Interrupted       bool         `json:"interrupted,omitempty"`
	Requests          int64        `json:"requests"` // completed, failed ones included
	IDs               int64        `json:"ids"`      // in the answers of the successful requests: count × (requests - errors)
	Errors            int64        `json:"errors"`
	ErrorKinds        []*ErrorKind `json:"error_kinds"` // most frequent first
	RequestsPerSecond float64      `json:"requests_per_second"`
	IDsPerSecond      float64      `json:"ids_per_second"`
	// LatencyUS is the latency of the successful requests: with a Rate
	// from when each was due by the schedule (LatencyFrom "schedule"), so
	// that a stall counts for every request it held back; without, from
	// when each was sent ("send"), the same as ServiceTimeUS.
	LatencyUS     Latency `json:"latency_us"`
	LatencyFrom   string  `json:"latency_from"`
	ServiceTimeUS Latency `json:"service_time_us"` // from send to answer
	Unique        *Unique `json:"unique,omitempty"`

	hist      *histogram // what LatencyUS reports
	service   *histogram
	duration  time.Duration // Config.Duration, as given
	uniqueCap int64
}

// Err says why the run failed, if it did: an ID repeated, a request failed,
// or none completed.
func (s *Summary) Err() error {
	switch {
	case s.Unique != nil && s.Unique.Duplicates > 0:
		return fmt.Errorf("%d duplicate IDs", s.Unique.Duplicates)
	case s.Errors > 0:
		return fmt.Errorf("%d of %d requests failed", s.Errors, s.Requests)
	case s.Requests == 0:
		return errors.New("no request completed")
	}
	return nil
}

// ErrorKind counts the failed requests of one kind: "http 503", "grpc
// Unavailable", "transport timeout", "bad body", "wrong count"...
type ErrorKind struct {
	Kind    string `json:"kind"`
	Count   int64  `json:"count"`
	Example string `json:"example"`
}

// Server counts the requests the Go client sent to one server of
// Config.Servers, retries included: Failures of them failed (transport,
// timeout, 5xx, garbled answer) and were retried on the next server.
type Server struct {
	URL      string `json:"url"`
	Zone     string `json:"zone,omitempty"`
	Requests uint64 `json:"requests"`
	Failures uint64 `json:"failures"`
}

// setServers fills in Servers from the client's counters.
func (s *Summary) setServers(st client.Stats) {
	for _, e := range st.Endpoints {
		s.Servers = append(s.Servers, Server{URL: e.URL, Zone: e.Zone, Requests: e.Requests, Failures: e.Failures})
	}
}

// Latency gives quantiles, maximum and mean in microseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Unique is the result of Config.CheckUnique. Checked + Unchecked is the
// summary's IDs. The first request's IDs (the probe, before the run) are
// compared too but not counted in either.
type Unique struct {
	Checked    int64   `json:"checked"`    // the run's IDs kept and compared with every ID kept
	Unchecked  int64   `json:"unchecked"`  // the run's IDs past the memory cap
	Duplicates int64   `json:"duplicates"` // IDs checked equal to an earlier one
	Examples   []int64 `json:"examples,omitempty"`
}

func summarize(o *Config, workers []*worker, probeIDs []int64, elapsed time.Duration, interrupted bool) *Summary {
	s := &Summary{Transport: "http", Target: o.target(), Mode: o.Mode, Tag: o.Tag, Count: o.Count,
		Concurrency: o.Concurrency, Rate: o.Rate, DurationSeconds: o.Duration.Seconds(), ElapsedSeconds: elapsed.Seconds(),
		Interrupted: interrupted, ErrorKinds: []*ErrorKind{}, service: &histogram{}, LatencyFrom: "send"}
	s.hist = s.service
	if o.Rate > 0 {
		s.hist, s.LatencyFrom = &histogram{}, "schedule"
	}
	switch {
	case o.GRPC != "":
		s.Transport = "grpc"
	case len(o.Servers) > 0:
		s.Transport, s.Zone = "client", o.Zone
	}
	s.duration, s.uniqueCap = o.Duration, o.UniqueCap
	kinds := map[string]*ErrorKind{}
	var seen []int64
	if o.CheckUnique {
		seen = append(seen, probeIDs...)
	}
	for _, w := range workers {
		s.Requests += w.requests.Load()
		s.IDs += w.ids.Load()
		s.Errors += w.errors.Load()
		s.service.merge(&w.hist)
		if w.sched != nil {
			s.hist.merge(w.sched)
		}
		for _, k := range w.failures {
			if m := kinds[k.Kind]; m != nil {
				m.Count += k.Count
			} else {
				kinds[k.Kind] = &ErrorKind{Kind: k.Kind, Count: k.Count, Example: k.Example}
			}
		}
		if o.CheckUnique {
			seen = append(seen, w.seen...)
			w.seen = nil
		}
	}
	for _, k := range kinds {
		s.ErrorKinds = append(s.ErrorKinds, k)
	}
	slices.SortFunc(s.ErrorKinds, func(a, b *ErrorKind) int {
		if a.Count != b.Count {
			return int(b.Count - a.Count)
		}
		return strings.Compare(a.Kind, b.Kind)
	})
	if secs := elapsed.Seconds(); secs > 0 {
		s.RequestsPerSecond = float64(s.Requests) / secs
		s.IDsPerSecond = float64(s.IDs) / secs
	}
	s.LatencyUS, s.ServiceTimeUS = s.hist.latency(), s.service.latency()
	if o.CheckUnique {
		s.Unique = checkUnique(seen)
		// The probe's IDs, distinct and increasing (the probe passed
		// checkIDs), are compared but not counted: every duplicate
		// is one of the run's IDs.
		s.Unique.Checked -= int64(len(probeIDs))
		s.Unique.Unchecked = s.IDs - s.Unique.Checked
	}
	return s
}

// checkUnique sorts ids and counts the repeats.
func checkUnique(ids []int64) *Unique {
	slices.Sort(ids)
	u := &Unique{Checked: int64(len(ids))}
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			u.Duplicates++
			if len(u.Examples) < 5 && (len(u.Examples) == 0 || u.Examples[len(u.Examples)-1] != ids[i]) {
				u.Examples = append(u.Examples, ids[i])
			}
		}
	}
	return u
}

// WriteText writes the summary as leaf bench prints it: counts, rates,
// errors by kind, latency quantiles and distribution, the uniqueness check.
func (s *Summary) WriteText(w io.Writer) error {
	what := fmt.Sprintf("segment IDs of tag %q", s.Tag)
	if s.Mode == "snowflake" {
		what = "snowflake IDs"
	}
	via := "HTTP " + s.Target
	switch s.Transport {
	case "grpc":
		via = "gRPC " + s.Target
	case "client":
		via = "the Go client of " + s.Target
		if s.Zone != "" {
			via += " in zone " + s.Zone
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "leaf bench: %s, %d per request, %s, concurrency %d, %v", what, s.Count, via, s.Concurrency, s.duration)
	if s.Rate > 0 {
		fmt.Fprintf(&b, ", rate %d/s", s.Rate)
	}
	if s.Interrupted {
		b.WriteString(" (interrupted)")
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  requests  %12d  %12.1f/s  in %.2fs\n", s.Requests, s.RequestsPerSecond, s.ElapsedSeconds)
	fmt.Fprintf(&b, "  IDs       %12d  %12.1f/s\n", s.IDs, s.IDsPerSecond)
	fmt.Fprintf(&b, "  errors    %12d\n", s.Errors)
	for _, k := range s.ErrorKinds {
		fmt.Fprintf(&b, "    %-28s %10d  e.g. %q\n", k.Kind, k.Count, k.Example)
	}
	if len(s.Servers) > 0 {
		b.WriteString("  requests per server (retries included):\n")
		for _, sv := range s.Servers {
			name := sv.URL
			if sv.Zone != "" {
				name = sv.Zone + "=" + sv.URL
			}
			fmt.Fprintf(&b, "    %-40s %10d  %d failed\n", name, sv.Requests, sv.Failures)
		}
	}
	h := s.hist
	if h.n > 0 {
		quantiles := func(name string, h *histogram) {
			fmt.Fprintf(&b, "  %s p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  mean %s\n", name,
				fmtLatency(h.quantile(0.5)), fmtLatency(h.quantile(0.9)), fmtLatency(h.quantile(0.99)),
				fmtLatency(h.quantile(0.999)), fmtLatency(h.max), fmtLatency(int64(h.mean())))
		}
		if s.LatencyFrom == "schedule" {
			quantiles("latency from schedule  ", h)
			quantiles("service time           ", s.service)
			b.WriteString("  latency distribution (successful requests, from schedule):\n")
		} else {
			quantiles("latency  ", h)
			b.WriteString("  latency distribution (successful requests):\n")
		}
		rows := h.coarse()
		var peak uint64
		for _, r := range rows {
			peak = max(peak, r.count)
		}
		var cum uint64
		for _, r := range rows {
			cum += r.count
			bar := int(math.Round(40 * float64(r.count) / float64(peak)))
			fmt.Fprintf(&b, "    <= %-8s %12d  %7.3f%%  %s\n", fmtLatency(r.le), r.count,
				100*float64(cum)/float64(h.n), strings.Repeat("#", bar))
		}
	}
	if u := s.Unique; u != nil {
		fmt.Fprintf(&b, "  unique    %12d IDs checked", u.Checked)
		if u.Unchecked > 0 {
			fmt.Fprintf(&b, " (%d more past the cap of %d not checked)", u.Unchecked, s.uniqueCap)
		}
		if u.Duplicates == 0 {
			b.WriteString(", no duplicates\n")
		} else {
			fmt.Fprintf(&b, ", %d DUPLICATES, e.g. %v\n", u.Duplicates, u.Examples)
		}
	} else {
		b.WriteString("  unique    not checked (--check-unique)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fmtLatency prints nanoseconds to three significant digits: 412µs, 1.23ms.
func fmtLatency(ns int64) string {
	d := time.Duration(ns)
	for unit := time.Duration(1); unit < time.Hour; unit *= 10 {
		if d < 1000*unit {
			return d.Round(unit).String()
		}
	}
	return d.Round(time.Second).String()
}
