package main

import (
	"encoding/json"
	"testing"

	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/internal/testutil"
)

// TestServeHistory: serve keeps the monitor's history, sampled from the
// generators and the latency histogram of the ID routes, and stops its
// sampler on shutdown.
func TestServeHistory(t *testing.T) {
	t.Parallel()
	s := serveInProcess(t, dataEnv(t), "--listen", "127.0.0.1:0")
	type series []*float64
	var h struct {
		Detail  bool    `json:"detail"`
		Next    uint64  `json:"next"`
		TimeMS  []int64 `json:"time_ms"`
		Segment struct {
			IDsPerSec series `json:"ids_per_sec"`
		} `json:"segment"`
		Snowflake struct {
			IDsPerSec series `json:"ids_per_sec"`
			LeadS     series `json:"lead_s"`
		} `json:"snowflake"`
		Latency struct {
			P50MS series `json:"p50_ms"`
			P99MS series `json:"p99_ms"`
		} `json:"latency"`
		Tags []struct {
			Tag       string `json:"tag"`
			Remaining series `json:"remaining"`
		} `json:"tags"`
	}
	positive := func(s series) bool {
		for _, v := range s {
			if v != nil && *v > 0 {
				return true
			}
		}
		return false
	}
	// Traffic until a sample has seen it: IDs of both modes, and their
	// requests' latency.
	testutil.WaitFor(t, "a sample of the traffic", func() bool {
		testutil.FetchID(t, s.URL("/api/segment/get/"+config.SeedTag))
		testutil.FetchID(t, s.URL("/api/snowflake/get/x"))
		code, body := testutil.Get(t, s.URL("/v2/status/history"))
		if code != 200 {
			t.Fatalf("/v2/status/history: %d %s", code, body)
		}
		h.Tags = nil
		if err := json.Unmarshal([]byte(body), &h); err != nil {
			t.Fatalf("/v2/status/history: %v: %s", err, body)
		}
		return positive(h.Segment.IDsPerSec) && positive(h.Snowflake.IDsPerSec) && positive(h.Latency.P50MS) &&
			positive(h.Latency.P99MS) && len(h.Tags) == 1 && positive(h.Tags[0].Remaining)
	})
	if !h.Detail || h.Tags[0].Tag != config.SeedTag || !positive(h.Snowflake.LeadS) || uint64(len(h.TimeMS)) != h.Next {
		t.Errorf("history: %+v", h)
	}
	if code := s.Stop(t); code != 0 {
		t.Fatalf("serve exited %d: %s", code, s.Log.String())
	}
}
