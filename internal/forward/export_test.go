package forward

// Waiting is how many requests for tag are queued, the call in flight's
// included.
func (f *Forwarder) Waiting(tag string) int {
	q := f.queue(tag)
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}
