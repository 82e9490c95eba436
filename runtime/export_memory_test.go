package runtime

import (
	"context"
	"errors"
)

// AddIdle makes a new instance of p and puts it in p's pool unused, for
// tests to compare what an instance holds new with what it holds reset.
func AddIdle(ctx context.Context, rt *Runtime, p *Program) error {
	if p.pool == nil {
		return errors.New(p.Name + ": not pooled")
	}
	c := &Call{program: p}
	if !rt.budget.take(p.minMemory) {
		return errors.New(p.Name + ": over the memory budget")
	}
	inst, err := rt.newInstance(context.WithValue(ctx, callKey{}, c), c, p.minMemory)
	if err != nil {
		return err
	}
	inst.unbind(c)
	rt.budget.give(inst.mem.first.charged)
	inst.mem.first.charged = 0
	p.pool.put(inst)
	return nil
}

// IdleMemory returns the memory of each of p's idle instances, and the
// length of p's image at its start, 0 without one.
func IdleMemory(p *Program) (mems [][]byte, image int) {
	if p.image != nil {
		image = len(p.image.data)
	}
	if p.pool == nil {
		return nil, image
	}
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	for _, inst := range p.pool.idle {
		mems = append(mems, inst.mem.first.buf)
	}
	return mems, image
}

// KeptPrefix is how much of a region's start is kept present between the
// instances that have it.
const KeptPrefix = keptPrefix

// FreeRegions returns each region rt keeps for reuse, whole, and how far
// from its start each is accessible.
func FreeRegions(rt *Runtime) (mems [][]byte, accessible []uint64) {
	rt.regions.mu.Lock()
	defer rt.regions.mu.Unlock()
	for _, r := range rt.regions.free {
		mems = append(mems, r.mem)
		accessible = append(accessible, r.rw)
	}
	return mems, accessible
}
