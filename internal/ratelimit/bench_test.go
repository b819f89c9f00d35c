package ratelimit

import (
	"sync/atomic"
	"testing"
)

// The benchmarks use the real clock: its read is part of what a request
// pays. "allowed" runs at a rate no loop can reach, so every call takes a
// token and writes the map; "refused" only reads it.

func benchLimiter(b *testing.B, c Config) *Limiter {
	b.Helper()
	l, err := New(c)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(l.Close)
	return l
}

var (
	allowAll  = Config{Rate: 1e9, Burst: 1000}
	refuseAll = Config{Rate: 1e-3, Burst: 1}
)

// BenchmarkAllow: one known client, the steady state of the hot path.
func BenchmarkAllow(b *testing.B) {
	for _, bc := range []struct {
		name string
		c    Config
	}{{"allowed", allowAll}, {"refused", refuseAll}} {
		b.Run(bc.name, func(b *testing.B) {
			l := benchLimiter(b, bc.c)
			c := ipv4(1)
			l.Allow(c)
			b.ReportAllocs()
			for b.Loop() {
				l.Allow(c)
			}
		})
	}
}

// BenchmarkAllowParallel: every goroutine its own client, the common case,
// where shards keep them off each other's locks; and all on one client, the
// worst case, one lock for everybody.
func BenchmarkAllowParallel(b *testing.B) {
	for _, bc := range []struct {
		name   string
		shared bool
	}{{"own client", false}, {"one shared client", true}} {
		b.Run(bc.name, func(b *testing.B) {
			l := benchLimiter(b, allowAll)
			var next atomic.Int32
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				c := ipv4(1)
				if !bc.shared {
					c = ipv4(int(next.Add(1)))
				}
				for pb.Next() {
					l.Allow(c)
				}
			})
		})
	}
}

// BenchmarkAllowManyClients: requests spread over 100,000 known clients, a
// full table: the maps no longer fit in cache.
func BenchmarkAllowManyClients(b *testing.B) {
	const clients = DefaultMaxClients
	for _, parallel := range []bool{false, true} {
		name := "serial"
		if parallel {
			name = "parallel"
		}
		b.Run(name, func(b *testing.B) {
			l := benchLimiter(b, allowAll)
			for i := range clients {
				l.Allow(ipv4(i))
			}
			b.ReportAllocs()
			if !parallel {
				i := 0
				for b.Loop() {
					l.Allow(ipv4(i))
					if i++; i == clients {
						i = 0
					}
				}
				return
			}
			var seq atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				// A stride through the clients per goroutine, so that
				// goroutines do not walk them in step.
				i := int(seq.Add(7919)) % clients
				for pb.Next() {
					l.Allow(ipv4(i))
					if i++; i == clients {
						i = 0
					}
				}
			})
		})
	}
}

// BenchmarkAllowFlood: every request from an address never seen, with the
// tables full of clients still in use: the overflow path, probes and sweeps
// included, what a flood of spoofed or rotating addresses costs.
func BenchmarkAllowFlood(b *testing.B) {
	l := benchLimiter(b, Config{Rate: 1e-3, Burst: 1}) // nothing refills
	for i := range DefaultMaxClients {
		l.Allow(ipv4(i))
	}
	i := DefaultMaxClients
	b.ReportAllocs()
	for b.Loop() {
		l.Allow(ipv4(i))
		i++
	}
	if st := l.Stats(); st.Clients != DefaultMaxClients {
		b.Fatalf("%d clients tracked after the flood", st.Clients)
	}
}
