// Package steplog is the record that kill-and-resume tests keep of a
// training loop: a child process writes each step's row ids to a file,
// flushed and synced before every checkpoint, and the parent, after a
// SIGKILL, keeps the steps that the checkpoint store says were committed.
// Their ids, over every run, must be the uninterrupted run's, in order.
//
// The file holds "start N" (the step a run resumed from), one "step id id
// ..." line per step, and "done" at the end of an epoch. A kill may cut the
// last line short; it lies past every checkpoint, so Read drops it.
package steplog

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Log is a child's open step log.
type Log struct {
	f     *os.File
	w     *bufio.Writer
	every int64
}

// Create appends to the log at path, saying that the run resumed at step
// start. every is the checkpoint interval: Step makes each every-th step's
// lines durable before the checkpoint that commits them is taken.
func Create(path string, start, every int64) (*Log, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	l := &Log{f: f, w: bufio.NewWriter(f), every: every}
	fmt.Fprintf(l.w, "start %d\n", start)
	if err := l.w.Flush(); err != nil { // a parent may time its kill from here
		f.Close()
		return nil, err
	}
	return l, nil
}

// Step logs a step's ids. Call it before the checkpointer's Step: what a
// checkpoint commits must be on disk before it.
func (l *Log) Step(step int64, ids []int64) error {
	fmt.Fprintf(l.w, "%d", step)
	for _, id := range ids {
		fmt.Fprintf(l.w, " %d", id)
	}
	fmt.Fprintln(l.w)
	if step%l.every != 0 {
		return nil
	}
	if err := l.w.Flush(); err != nil {
		return err
	}
	return l.f.Sync()
}

// Done logs the end of the epoch and closes the log.
func (l *Log) Done() error {
	fmt.Fprintln(l.w, "done")
	if err := l.w.Flush(); err != nil {
		l.f.Close()
		return err
	}
	return l.f.Close()
}

// Close closes the log without ending the epoch.
func (l *Log) Close() error { return l.f.Close() }

// HoldAt blocks on stdin once step reaches hold (0: never), which the parent
// keeps open until its kill: a run to be killed cannot reach the end of the
// epoch, however slow the machine.
func HoldAt(step, hold int64) {
	if hold > 0 && step >= hold {
		io.Copy(io.Discard, os.Stdin)
	}
}

// Entry is one logged step.
type Entry struct {
	Step int64
	IDs  []int64
}

// Run is what one run logged.
type Run struct {
	// Start is the step the run resumed from, -1 where it was killed
	// before it said so.
	Start   int64
	Entries []Entry
	// Done says the run reached the end of the epoch.
	Done bool
}

// Committed appends to ids those of the steps after from up to and
// including to: what the run's checkpoints committed where from was the
// last checkpoint before it and to is the last one after it.
func (r Run) Committed(ids []int64, from, to int64) []int64 {
	for _, e := range r.Entries {
		if e.Step > from && e.Step <= to {
			ids = append(ids, e.IDs...)
		}
	}
	return ids
}

// Read reads the log at path, of one run; a run killed before it created
// the log logged nothing.
func Read(path string) (Run, error) {
	r := Run{Start: -1}
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return r, nil
	}
	if err != nil {
		return r, err
	}
	text := string(data)
	text = text[:strings.LastIndexByte(text, '\n')+1]
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "start" && len(f) == 2:
			if r.Start, err = strconv.ParseInt(f[1], 10, 64); err != nil {
				return r, fmt.Errorf("%s: %q: %w", path, line, err)
			}
		case f[0] == "done":
			r.Done = true
		default:
			e := Entry{}
			if e.Step, err = strconv.ParseInt(f[0], 10, 64); err != nil {
				return r, fmt.Errorf("%s: %q: %w", path, line, err)
			}
			for _, s := range f[1:] {
				id, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					return r, fmt.Errorf("%s: %q: %w", path, line, err)
				}
				e.IDs = append(e.IDs, id)
			}
			r.Entries = append(r.Entries, e)
		}
	}
	return r, nil
}
