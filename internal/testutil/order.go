package testutil

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// AskConcurrently calls ask from workers goroutines, each times each, and
// returns the answers, each with when it was sent and received on one
// counter, for CheckOrdered. A failed ask fails t and ends its worker.
func AskConcurrently(t testing.TB, workers, each int, ask func(i int) ([]int64, error)) []Answer {
	var clock atomic.Int64 // orders the events: a send, an answer
	answers := make([][]Answer, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				a := Answer{Sent: clock.Add(1)}
				var err error
				a.IDs, err = ask(i)
				a.Received = clock.Add(1)
				if err != nil {
					t.Error(err)
					return
				}
				answers[w] = append(answers[w], a)
			}
		})
	}
	wg.Wait()
	return slices.Concat(answers...)
}

// Answer is one request's IDs and when it was sent and its answer received,
// in any unit that orders the events of one process (a monotonic clock's
// nanoseconds, an atomic counter).
type Answer struct {
	Sent, Received int64
	IDs            []int64
}

// CheckOrdered checks the promise of an ordered tag on the answers of
// concurrent requests (OrderViolations) and fails t with the first ten
// violations. It returns the number of IDs.
func CheckOrdered(t testing.TB, answers []Answer) int {
	t.Helper()
	v, n := OrderViolations(answers)
	for i, s := range v {
		if i == 10 {
			t.Errorf("... and %d more", len(v)-i)
			break
		}
		t.Error(s)
	}
	if len(v) > 0 {
		t.FailNow()
	}
	return n
}

// OrderViolations lists how answers break the promise of an ordered tag:
// every ID unique, each answer's IDs increasing, and every request that
// was sent after another's answer was received got larger IDs than all of
// that answer's. Requests in flight together may get their IDs in either
// order. n is the number of IDs.
func OrderViolations(answers []Answer) (v []string, n int) {
	byReceived := slices.Clone(answers)
	slices.SortFunc(byReceived, func(a, b Answer) int { return cmp.Compare(a.Received, b.Received) })
	bySent := slices.Clone(answers)
	slices.SortFunc(bySent, func(a, b Answer) int { return cmp.Compare(a.Sent, b.Sent) })
	var all []int64
	for _, a := range answers {
		for i := 1; i < len(a.IDs); i++ {
			if a.IDs[i] <= a.IDs[i-1] {
				v = append(v, fmt.Sprintf("an answer's IDs do not increase: %v", a.IDs))
				break
			}
		}
		all = append(all, a.IDs...)
	}
	// Sweep the requests in the order they were sent, taking in every
	// answer received before each: the largest ID of those is a floor.
	var floor int64
	var floorAt Answer
	done := 0
	for _, a := range bySent {
		for done < len(byReceived) && byReceived[done].Received < a.Sent {
			if ids := byReceived[done].IDs; len(ids) > 0 && slices.Max(ids) > floor {
				floor, floorAt = slices.Max(ids), byReceived[done]
			}
			done++
		}
		if len(a.IDs) > 0 && slices.Min(a.IDs) <= floor {
			v = append(v, fmt.Sprintf("request sent at %d got %v, not above %d, answered at %d to a request sent at %d",
				a.Sent, a.IDs, floor, floorAt.Received, floorAt.Sent))
		}
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			v = append(v, fmt.Sprintf("duplicate ID %d", all[i]))
		}
	}
	return v, len(all)
}
