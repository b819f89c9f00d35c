package chaos

import (
	"testing"
	"time"
)

// The ordered checks run without LEAF_CHAOS: a check that cannot fail
// would let a broken order pass the chaos run unseen.

func TestCheckOrdered(t *testing.T) {
	for _, c := range []struct {
		name    string
		answers [][]int64 // in the order one goroutine received them, from servers in turn
		want    int       // violations
	}{
		{"increasing across servers and batches", [][]int64{{1}, {2, 3, 9}, {10}, {1000}}, 0},
		{"an answer below the one before", [][]int64{{5}, {7}, {6}}, 1},
		{"the same ID again from another server", [][]int64{{5}, {5}}, 1},
		{"decreasing within a batch", [][]int64{{1}, {3, 2, 4}}, 1},
		{"a batch starting at the last ID", [][]int64{{1, 2}, {2, 3}}, 1},
		{"zero", [][]int64{{0}}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorker(workerSpec{name: "ordered", mode: orderedMode}, 1, leafServers)
			for i, ids := range c.answers {
				w.checkOrdered(record{server: int8(i % leafServers), mode: orderedMode}, orderedTag, ids)
			}
			if got := len(w.violations); got != c.want {
				t.Errorf("%d violations, want %d: %+v", got, c.want, w.violations)
			}
		})
	}
}

func TestOrderedExcuse(t *testing.T) {
	s := time.Second
	r := &run{servers: []*leafServer{{idx: 0, proc: &proc{name: "leaf-0"}}, {idx: 1, proc: &proc{name: "leaf-1"}}},
		dbDown: span{20 * s, 27 * s}}
	r.servers[1].downs = []span{{10 * s, 12 * s}}
	for _, c := range []struct {
		from, to time.Duration
		want     string
	}{
		{9 * s, 9500 * time.Millisecond, ""},
		{9500 * time.Millisecond, 10500 * time.Millisecond, "owner lease after leaf-1's kill"},
		{14 * s, 14 * s, "owner lease after leaf-1's kill"},
		{10*s + ownerLease + ownerGrace + time.Millisecond, 16 * s, ""},
		{19 * s, 20 * s, "mariadb outage + owner lease"},
		{27*s + ownerLease + ownerGrace, 33 * s, "mariadb outage + owner lease"},
		{27*s + ownerLease + ownerGrace + time.Millisecond, 33 * s, ""},
	} {
		if got := r.orderedExcuse(record{start: c.from, end: c.to, mode: orderedMode}); got != c.want {
			t.Errorf("request %v–%v: excuse %q, want %q", c.from, c.to, got, c.want)
		}
	}
}
