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
