package ordered

// PauseAfterTake makes every take of an ordered tag's IDs call f between
// the take and the look at the lease's deadline, as a process paused
// there would. Set it before the generator's first request.
func (t *Tags) PauseAfterTake(f func(tag string, start, end int64)) { t.afterTake = f }

// HeldTokens is how many tags the fencing-token map holds.
func (t *Tags) HeldTokens() int {
	n := 0
	t.tokens.Range(func(any, any) bool { n++; return true })
	return n
}
