package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// terminalProgress reports whether a progress line may be drawn on stderr:
// only on a terminal, where "\r" redraws it, and not while the command's
// own output goes to the same terminal, where it would tear the rows apart.
func terminalProgress(streamsStdout bool) bool {
	if !isTerminal(os.Stderr) {
		return false
	}
	return !streamsStdout || !isTerminal(os.Stdout)
}

// isTerminal tells a terminal from a file or pipe by its mode. /dev/null is
// a character device too, and "sluice cat data/ >/dev/null" is how a user
// times a read, so it is told apart by name.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(fi, null)
}

// progress redraws one status line on a terminal until stopped. The first
// draw waits a moment so that quick commands leave no trace.
type progress struct {
	w      io.Writer
	render func(elapsed time.Duration) string
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

const (
	progressDelay    = 300 * time.Millisecond
	progressInterval = 150 * time.Millisecond
)

// startProgress starts drawing render's line on w, or does nothing if !on.
// The result's Stop is safe to call on a progress that never started.
func startProgress(w io.Writer, on bool, render func(elapsed time.Duration) string) *progress {
	p := &progress{w: w, render: render, stop: make(chan struct{}), done: make(chan struct{})}
	if !on {
		close(p.done)
		return p
	}
	go p.loop()
	return p
}

func (p *progress) loop() {
	defer close(p.done)
	start := time.Now()
	timer := time.NewTimer(progressDelay)
	defer timer.Stop()
	drawn := false
	for {
		select {
		case <-p.stop:
			if drawn {
				fmt.Fprint(p.w, "\r\x1b[K") // leave the terminal as it was
			}
			return
		case <-timer.C:
			fmt.Fprint(p.w, "\r\x1b[K"+p.render(time.Since(start)))
			drawn = true
			timer.Reset(progressInterval)
		}
	}
}

// Stop erases the line and returns once nothing more will be drawn, so
// that an error or the output printed next starts on a clean line.
func (p *progress) Stop() {
	p.once.Do(func() { close(p.stop) })
	<-p.done
}

// bar draws done out of total as a fixed-width bar with a percentage.
func bar(done, total int64) string {
	const width = 24
	if total <= 0 {
		return ""
	}
	frac := min(float64(done)/float64(total), 1)
	n := int(frac * width)
	return fmt.Sprintf("[%s%s] %3.0f%%", strings.Repeat("#", n), strings.Repeat(".", width-n), frac*100)
}

// humanBytes writes a byte count with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// humanCount writes a count with k, M or G, for rates on a status line.
func humanCount(f float64) string {
	switch {
	case f >= 1e9:
		return fmt.Sprintf("%.1fG", f/1e9)
	case f >= 1e6:
		return fmt.Sprintf("%.1fM", f/1e6)
	case f >= 1e4:
		return fmt.Sprintf("%.0fk", f/1e3)
	}
	return fmt.Sprintf("%.0f", f)
}
