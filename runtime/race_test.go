//go:build race

package runtime_test

// raceEnabled: the test binary runs under the race detector.
const raceEnabled = true
