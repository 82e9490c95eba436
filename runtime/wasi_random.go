package runtime

import "crypto/rand"

// randomChunk bounds what callRandom reads before it looks again at whether
// its call is done: a megabyte takes the host a few milliseconds.
const randomChunk = 1 << 20

// callRandom is an instance's WASI randomness (random_get): crypto/rand's,
// read a chunk at a time, and none once the call the instance runs is done
// (the call traps), since one random_get may ask for all of memory: 50
// MiB ran 240 ms past a deadline of 200 ms on a loaded machine, and 4 GiB
// under --memory 4GiB would run seconds. An instance serves many calls, so
// the call is read from its sleeper, which bind sets.
type callRandom struct{ inst *instance }

func (r callRandom) Read(b []byte) (int, error) {
	for n := 0; n < len(b); n += randomChunk {
		r.inst.mem.rt.checkRunning(r.inst.sleeper.ctx)
		rand.Read(b[n:min(n+randomChunk, len(b))])
	}
	return len(b), nil
}
