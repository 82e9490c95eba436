package registry

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progressMin is the smallest transfer that gets a progress line: below it a
// transfer on loopback or a good link is over before a line is worth reading.
const progressMin = 4 << 20

// progressEvery spaces the redraws of a progress line.
const progressEvery = 100 * time.Millisecond

// progress draws one line, redrawn in place with \r, for one transfer.
type progress struct {
	w     io.Writer
	label string
	total int64

	mu    sync.Mutex
	n     int64
	drawn time.Time
}

// progressFor returns a progress line for a transfer of size bytes, or nil
// when there is no writer or the transfer is small.
func (c *Client) progressFor(label string, size int64) *progress {
	if c.progress == nil || size < progressMin {
		return nil
	}
	return &progress{w: c.progress, label: label, total: size}
}

// reader counts what is read through r.
func (p *progress) reader(r io.Reader) io.Reader { return &progressReader{r: r, p: p} }

func (p *progress) add(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += int64(n)
	if now := time.Now(); now.Sub(p.drawn) >= progressEvery {
		p.drawn = now
		p.draw()
	}
}

// done draws the final state and ends the line.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw()
	fmt.Fprintln(p.w)
}

func (p *progress) draw() {
	pct := 100 * p.n / p.total
	// Trailing spaces wipe what a longer earlier line left.
	fmt.Fprintf(p.w, "\r%s  %s / %s  %3d%%   ", p.label, mib(p.n), mib(p.total), pct)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

type progressReader struct {
	r io.Reader
	p *progress
}

func (r *progressReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.p.add(n)
	return n, err
}
