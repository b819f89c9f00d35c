// Package parallel runs many small store calls a few at a time: where there
// may be thousands (a generator's give-backs at Close, the leases it
// releases, the renewals of leases whose batch failed), they take a few
// hundred round trips' time rather than thousands, and the store's pool (16
// connections) is not flooded.
package parallel

import (
	"sync"
	"sync/atomic"
)

// Workers is how many calls Run runs at once.
const Workers = 8

// Run runs f(0..n-1) on up to Workers goroutines and waits.
func Run(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, Workers) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}
