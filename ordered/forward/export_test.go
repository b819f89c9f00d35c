package forward

import "time"

// Waiting is how many requests for tag are queued, the call in flight's
// included. It makes no queue: one made here would stand in the map for
// the tag's next requests.
func (f *Forwarder) Waiting(tag string) int {
	v, ok := f.queues.Load(tag)
	if !ok {
		return 0
	}
	q := v.(*tagQueue)
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}

// Queues is how many tags have a queue.
func (f *Forwarder) Queues() int {
	n := 0
	f.queues.Range(func(any, any) bool { n++; return true })
	return n
}

// Owners is how many owners' pools are kept.
func (f *Forwarder) Owners() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.owners)
}

// UseOwner makes (or touches) the pool of the owner at url.
func (f *Forwarder) UseOwner(url string) error {
	_, err := f.ownerFor(url)
	return err
}

// AgeOwners moves every pool's last use d into the past.
func (f *Forwarder) AgeOwners(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range f.owners {
		o.lastUsed.Add(-int64(d))
	}
}

const KeptOwners, OwnerIdle = keptOwners, ownerIdle
