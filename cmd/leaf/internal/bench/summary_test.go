package bench

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestWriteText: the text summary of a small paced run over gRPC, whole.
// Service times cycle through 1..7ms, so the schedule is always kept and
// latency equals service time; one request in 40 fails; the cap stops the
// uniqueness check at 50 IDs.
func TestWriteText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFakeServer(2, func(i int64, _ bool) time.Duration { return time.Duration(i%7+1) * time.Millisecond })
		s.failEvery = 40
		o := &Config{GRPC: "10.0.0.1:9090", Mode: "segment", Tag: "t", Count: 2, Concurrency: 2, Duration: 500 * time.Millisecond,
			Rate: 100, CheckUnique: true, UniqueCap: 50}
		sum := runFake(t.Context(), o, s)
		var b strings.Builder
		if err := sum.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		want := `leaf bench: segment IDs of tag "t", 2 per request, gRPC 10.0.0.1:9090, concurrency 2, 500ms, rate 100/s
  requests            50         101.6/s  in 0.49s
  IDs                 98         199.2/s
  errors               1
    http 503                              1  e.g. "no IDs"
  latency from schedule   p50 4.03ms  p90 7ms  p99 7ms  p99.9 7ms  max 7ms  mean 3.92ms
  service time            p50 4.03ms  p90 7ms  p99 7ms  p99.9 7ms  max 7ms  mean 3.92ms
  latency distribution (successful requests, from schedule):
    <= 2ms                 7   14.286%  #############
    <= 5ms                22   59.184%  ########################################
    <= 10ms               20  100.000%  ####################################
  unique              50 IDs checked (48 more past the cap of 50 not checked), no duplicates
`
		if b.String() != want {
			t.Errorf("text summary\n%s\nwant\n%s", b.String(), want)
		}
		// The JSON form carries the same numbers.
		var back Summary
		if raw, err := json.Marshal(sum); err != nil || json.Unmarshal(raw, &back) != nil ||
			back.Requests != 50 || back.Errors != 1 || back.Transport != "grpc" || back.Unique.Unchecked != 48 || back.LatencyUS != sum.LatencyUS {
			t.Errorf("JSON round trip: %+v, %v", back, err)
		}
	})
}

func TestSummaryErr(t *testing.T) {
	tests := []struct {
		name string
		s    Summary
		want string // "" for none
	}{
		{"clean", Summary{Requests: 10, Unique: &Unique{Checked: 10}}, ""},
		{"clean, unchecked", Summary{Requests: 10}, ""},
		{"failures", Summary{Requests: 10, Errors: 3}, "3 of 10 requests failed"},
		{"duplicates first", Summary{Requests: 10, Errors: 3, Unique: &Unique{Duplicates: 2}}, "2 duplicate IDs"},
		{"nothing completed", Summary{}, "no request completed"},
	}
	for _, tt := range tests {
		err := tt.s.Err()
		if (err == nil) != (tt.want == "") || err != nil && err.Error() != tt.want {
			t.Errorf("%s: Err() = %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestCheckUnique(t *testing.T) {
	tests := []struct {
		ids        []int64
		duplicates int64
		examples   []int64
	}{
		{nil, 0, nil},
		{[]int64{3, 1, 2}, 0, nil},
		{[]int64{5, 5, 5}, 2, []int64{5}},
		{[]int64{9, 1, 9, 1, 2, 3, 4, 5, 6, 7, 2, 3, 4, 5, 6, 7}, 8, []int64{1, 2, 3, 4, 5}},
	}
	for _, tt := range tests {
		u := checkUnique(append([]int64(nil), tt.ids...))
		if u.Checked != int64(len(tt.ids)) || u.Duplicates != tt.duplicates || !slices.Equal(u.Examples, tt.examples) {
			t.Errorf("checkUnique(%v) = %+v, want %d duplicates, examples %v", tt.ids, u, tt.duplicates, tt.examples)
		}
	}
}

func TestFmtLatency(t *testing.T) {
	tests := []struct {
		ns   int64
		want string
	}{
		{0, "0s"},
		{999, "999ns"},
		{1234, "1.23µs"},
		{412_345, "412µs"},
		{1_234_567, "1.23ms"},
		{int64(12*time.Second + 340*time.Millisecond), "12.3s"},
	}
	for _, tt := range tests {
		if got := fmtLatency(tt.ns); got != tt.want {
			t.Errorf("fmtLatency(%d) = %q, want %q", tt.ns, got, tt.want)
		}
	}
}
