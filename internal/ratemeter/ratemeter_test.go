package ratemeter

import (
	"math"
	"testing"
	"time"
)

func TestRate(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tests := []struct {
		name    string
		samples [][2]float64 // seconds, value
		now     float64
		live    uint64
		want    float64
	}{
		{"no samples", nil, 5, 100, 0},
		{"one sample", [][2]float64{{0, 0}}, 2, 100, 50},
		{"too soon", [][2]float64{{0, 0}}, 0.05, 100, 0},
		{"oldest within window", [][2]float64{{0, 0}, {1, 10}, {2, 20}}, 4, 40, 10},
		{"older samples skipped", [][2]float64{{0, 0}, {5, 1000}, {14, 1900}}, 15, 2000, 100},
		{"all too old", [][2]float64{{0, 0}}, 30, 100, 0},
		{"counter reset", [][2]float64{{0, 500}}, 2, 100, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m Meter
			for _, s := range tt.samples {
				m.Sample(at(s[0]), uint64(s[1]))
			}
			if got := m.Rate(at(tt.now), tt.live); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("Rate = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRingWraps: after more samples than the ring holds, the rate still
// comes from the oldest sample within the window.
func TestRingWraps(t *testing.T) {
	var m Meter
	t0 := time.Unix(1_700_000_000, 0)
	for s := 0; s <= 100; s++ {
		m.Sample(t0.Add(time.Duration(s)*time.Second), uint64(s*7))
	}
	// Samples at 90..100 are held; at 100.5 the oldest within 10s is 91.
	now := t0.Add(100*time.Second + 500*time.Millisecond)
	want := float64(707-91*7) / 9.5
	if got := m.Rate(now, 707); math.Abs(got-want) > 1e-9 {
		t.Errorf("Rate = %v, want %v", got, want)
	}
}
