package registry

import (
	"github.com/berm-dev/berm/internal/httpbound"
)

// The bounds on every request a Client sends, when Config leaves them zero.
// A registry that sends a byte at a time, answers nothing, or reads an
// upload slowly would otherwise hold a pull or a push for ever.
const (
	// DefaultRequestTimeout bounds one request, retries and body included:
	// enough to move a 64 MiB image at 75 KiB/s.
	DefaultRequestTimeout = httpbound.DefaultTimeout
	// DefaultMinRate is the slowest a request may move bytes, in bytes a
	// second, averaged over DefaultMinRateWindow: 80 KiB in 20 s, which only
	// a stalled link or a trickling registry falls below.
	DefaultMinRate = httpbound.DefaultMinRate
	// DefaultMinRateWindow is the window the rate is averaged over: long
	// enough for a link's stall of a few seconds (TCP's retransmission, a
	// Wi-Fi handover) to pass.
	DefaultMinRateWindow = httpbound.DefaultWindow
)

// newBounded returns the transport that bounds each request as cfg says
// (zero: the default, negative: none), ending one with ErrSlow, or nil
// when cfg turns both off. Its Next is left for the caller.
func newBounded(cfg *Config) *httpbound.Transport {
	b := &httpbound.Transport{Limits: httpbound.Limits{
		Timeout: cfg.RequestTimeout, MinRate: cfg.MinRate, Window: cfg.MinRateWindow}, Err: ErrSlow}
	if b.Timeout == 0 {
		b.Timeout = DefaultRequestTimeout
	}
	if b.MinRate == 0 {
		b.MinRate = DefaultMinRate
	}
	if b.Window <= 0 {
		b.Window = DefaultMinRateWindow
	}
	b.Timeout, b.MinRate = max(b.Timeout, 0), max(b.MinRate, 0)
	if b.Timeout == 0 && b.MinRate == 0 {
		return nil
	}
	return b
}
