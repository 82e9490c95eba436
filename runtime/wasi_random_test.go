package runtime

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// An instance's randomness fills what random_get asks for, a chunk at a
// time, and traps once its call is done rather than fill the rest: one
// random_get may ask for all of memory.
func TestCallRandomEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	inst := &instance{sleeper: &sleeper{ctx: ctx}}
	inst.mem.rt = &Runtime{}
	b := make([]byte, 3*randomChunk+1)
	if n, err := (callRandom{inst}).Read(b); n != len(b) || err != nil || bytes.Count(b, []byte{0}) > len(b)/64 {
		t.Fatalf("read %d of %d, %v", n, len(b), err)
	}
	cancel()
	clear(b)
	func() {
		defer func() {
			tr, _ := recover().(*trap)
			if tr == nil || !errors.Is(tr, context.Canceled) {
				t.Errorf("read once the call is done: %v, want a trap", tr)
			}
		}()
		callRandom{inst}.Read(b)
	}()
	if bytes.Count(b, []byte{0}) != len(b) {
		t.Error("read once the call is done filled the buffer")
	}
}
