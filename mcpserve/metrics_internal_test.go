package mcpserve

import (
	"testing"
	"time"

	"github.com/berm-dev/berm/runtime"
)

// BenchmarkObserveMetrics is what metrics add to one call, alone: the
// call's series and the runtime's instantiation. BenchmarkCallMetrics
// measures it within the call, where the machine's noise is larger.
func BenchmarkObserveMetrics(b *testing.B) {
	s := &Server{}
	s.enableMetrics()
	args := []byte(`{"message":"hi"}`)
	out := runtime.Outcome{Result: args}
	for b.Loop() {
		s.ObserveInstantiate("echo", 30*time.Microsecond)
		s.observeCall("echo", "echo", 300*time.Microsecond, args, out, nil)
	}
}
