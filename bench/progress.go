package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// progress draws a one-line bar on a terminal: the scenario lines done of
// those expected, what runs now and the time since the start, redrawn
// a few times a second so that a long scenario visibly lives. Log lines
// written through it (it is an io.Writer) go above the bar. A nil
// *progress does nothing.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	total int
	done  int
	label string
	start time.Time
	shown bool // the bar is on the screen

	quit chan struct{}
	wg   sync.WaitGroup
}

// isTerminal reports whether w is a character device, as a terminal is
// and a file or a pipe is not.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// newProgress starts a bar on w, redrawn every 250 ms until close.
func newProgress(w io.Writer) *progress {
	p := &progress{w: w, start: time.Now(), quit: make(chan struct{})}
	p.wg.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				p.mu.Lock()
				p.draw()
				p.mu.Unlock()
			}
		}
	})
	return p
}

// expect sets how many lines the run will emit.
func (p *progress) expect(n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total = n
	p.draw()
}

// status names what runs now.
func (p *progress) status(label string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.label = label
	p.draw()
}

// lineDone counts one more scenario line.
func (p *progress) lineDone() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	p.draw()
}

// Write writes b (log lines) above the bar.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	n, err := p.w.Write(b)
	p.draw()
	return n, err
}

// close removes the bar and stops redrawing.
func (p *progress) close() {
	if p == nil {
		return
	}
	close(p.quit)
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
}

func (p *progress) clear() {
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}

func (p *progress) draw() {
	p.clear()
	fmt.Fprint(p.w, p.bar(40))
	p.shown = true
}

// bar renders the line, width cells of bar.
func (p *progress) bar(width int) string {
	filled := 0
	if p.total > 0 {
		filled = min(width, width*p.done/p.total)
	}
	el := time.Since(p.start).Truncate(time.Second)
	return fmt.Sprintf("[%s%s] %d/%d lines  %s  %s",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		p.done, p.total, el, p.label)
}
