package mcpserve

import "time"

// WithSessionGrace is cfg with d for youngGrace, so that a test's sessions
// grow old in milliseconds.
func WithSessionGrace(cfg HTTPConfig, d time.Duration) HTTPConfig {
	cfg.sessionGrace = d
	return cfg
}
