package metrics_test

import (
	"strings"
	"testing"

	"github.com/leafgo/leaf/metrics"
)

// TestDatabaseSeries: one series per database and metric, labelled by the
// database's place in the list, and none for a store of one database.
func TestDatabaseSeries(t *testing.T) {
	dbs := []metrics.Database{
		{Index: 0, Up: true, Reserves: 7, HighestID: 4000},
		{Index: 1, Up: false, Reserves: 2, Failures: 5, HighestID: 3000},
		{Index: 2, Up: true},
	}
	m := metrics.New(metrics.Config{Segment: &fakeSegment{}, Databases: func() []metrics.Database { return dbs }})
	text := scrapeText(t, m)
	for _, want := range []string{
		`leaf_segment_database_up{db="0"} 1`,
		`leaf_segment_database_up{db="1"} 0`,
		`leaf_segment_database_up{db="2"} 1`,
		`leaf_segment_database_reserves_total{db="0"} 7`,
		`leaf_segment_database_failures_total{db="1"} 5`,
		`leaf_segment_database_highest_id{db="1"} 3000`,
		`leaf_segment_database_highest_id{db="2"} 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("scrape lacks %q", want)
		}
	}
	fams := scrape(t, m)
	for _, name := range []string{"leaf_segment_database_up", "leaf_segment_database_reserves_total", "leaf_segment_database_failures_total", "leaf_segment_database_highest_id"} {
		if n := len(fams[name].GetMetric()); n != len(dbs) {
			t.Errorf("%s: %d series, want one per database (%d)", name, n, len(dbs))
		}
	}

	for _, cfg := range []metrics.Config{
		{Segment: &fakeSegment{}},                             // one database
		{Databases: func() []metrics.Database { return dbs }}, // segment mode off
	} {
		if text := scrapeText(t, metrics.New(cfg)); strings.Contains(text, "leaf_segment_database_") {
			t.Errorf("database series without a store of several databases:\n%s", text)
		}
	}
}

// TestForwardSeries: a server that forwards ordered tags' requests exports
// its counters, read at each scrape; one that does not, or with segment
// mode off, exports none.
func TestForwardSeries(t *testing.T) {
	var f metrics.Forwarded
	m := metrics.New(metrics.Config{Segment: &fakeSegment{}, Forwarded: func() metrics.Forwarded { return f }})
	if text := scrapeText(t, m); !strings.Contains(text, "leaf_segment_forward_calls_total 0\n") {
		t.Errorf("no zero forward series before any call:\n%s", text)
	}
	f = metrics.Forwarded{Calls: 3, Requests: 40, Failures: 1}
	text := scrapeText(t, m)
	for _, want := range []string{
		"leaf_segment_forward_calls_total 3",
		"leaf_segment_forward_requests_total 40",
		"leaf_segment_forward_failures_total 1",
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("scrape lacks %q", want)
		}
	}
	for _, cfg := range []metrics.Config{
		{Segment: &fakeSegment{}},
		{Forwarded: func() metrics.Forwarded { return f }},
	} {
		if text := scrapeText(t, metrics.New(cfg)); strings.Contains(text, "leaf_segment_forward_") {
			t.Errorf("forward series without a forwarding segment generator:\n%s", text)
		}
	}
}
