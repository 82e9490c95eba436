package runtime

// Install makes a program that Prepare returned callable under its name,
// replacing what was there; calls in flight on the old one finish first.
// Deploy is Prepare then Install; a caller that must decide between the two
// (whether the compiled program is still wanted) calls them apart.
func (r *Runtime) Install(p *Program) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		p.close()
		return ErrClosed
	}
	old := r.programs[p.Name]
	r.programs[p.Name] = p
	r.mu.Unlock()
	if old != nil && old != p {
		old.retire()
	}
	return nil
}
