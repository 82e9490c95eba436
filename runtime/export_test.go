package runtime

// Reused returns how many calls of p ran in an instance reset rather than
// made anew, and whether p pools its instances at all.
func Reused(p *Program) (n int64, pooled bool) {
	if p.pool == nil {
		return 0, false
	}
	return p.pool.reused.Load(), true
}

// Idle returns how many idle instances p's pool holds.
func Idle(p *Program) int {
	if p.pool == nil {
		return 0
	}
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	return len(p.pool.idle)
}

// ImageBytes returns the bytes p's memory image holds of the host's memory
// (its pages that are not all zeros, in a memory file) and its length; 0
// and 0 without one.
func ImageBytes(p *Program) (held uint64, length int) {
	if p.image == nil {
		return 0, 0
	}
	return p.image.held, len(p.image.data)
}

// Budget returns the bytes of Limits.TotalMemory in use.
func Budget(r *Runtime) uint64 { return r.budget.used.Load() }
