package stream

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/checkpoint/pebblestore"
	"github.com/sluicedata/sluice/internal/testkit/synth"
)

var soak = flag.Int("soak", 0, "crash test: SIGKILL the child this many times instead of 20; value matrix and FuzzValueOptions seeds: run this many cases instead of a minute's")

// The crash test's child, run as this test binary with crashChildEnv set:
// it streams a shuffled dataset through Map with prefetch, checkpoints every
// crashEvery batches into a pebble store, and logs each batch's ids to a
// file, flushed before every checkpoint, as "step id id ...". Once past step
// hold (if not 0) it waits on stdin, which the parent never closes before
// the kill: a run to be killed cannot reach the end of the epoch.
const (
	crashChildEnv = "SLUICE_CRASH_CHILD"
	crashEvery    = 4
	crashRun      = "crash"
	// crashSpan is the most batches a run to be killed may stream: 20 kills
	// of 12 batches leave most of the 316 batches to the final run.
	crashSpan = 3 * crashEvery
)

func crashOptions(dir string) Options {
	return Options{
		URLs:          []string{dir},
		Columns:       []string{"id"},
		BatchSize:     64,
		Shuffle:       true,
		Seed:          11,
		ShuffleWindow: 1000,
		NumSplits:     4,
		Limits:        Limits{PrefetchBatches: 16},
	}
}

// crashChild runs when the test binary is the child. Arguments come in the
// environment: data dir, store dir, log path, per-batch delay, hold.
func crashChild() int {
	args := strings.Split(os.Getenv(crashChildEnv), "|")
	data, storeDir, logPath := args[0], args[1], args[2]
	delay, _ := time.ParseDuration(args[3])
	hold, _ := strconv.ParseInt(args[4], 10, 64)
	ctx := context.Background()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		return 1
	}
	ds, err := Open(ctx, crashOptions(data))
	if err != nil {
		return fail(err)
	}
	store, err := pebblestore.Open(storeDir, pebblestore.Options{})
	if err != nil {
		return fail(err)
	}
	ck := NewCheckpointer(ds, store, crashRun, crashEvery)
	step, err := ck.Resume(ctx)
	if err != nil {
		return fail(err)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fail(err)
	}
	w := bufio.NewWriter(logf)
	fmt.Fprintf(w, "start %d\n", step)
	transform := func(_ context.Context, b arrow.RecordBatch) ([]int64, error) {
		return slices.Clone(b.Column(0).(*array.Int64).Int64Values()), nil
	}
	for ids, err := range Map(ctx, ds, transform) {
		if err != nil {
			return fail(err)
		}
		if hold > 0 && step >= hold {
			io.Copy(io.Discard, os.Stdin) // until the parent kills it
		}
		time.Sleep(delay) // the training step
		step++
		fmt.Fprintf(w, "%d", step)
		for _, id := range ids {
			fmt.Fprintf(w, " %d", id)
		}
		fmt.Fprintln(w)
		if step%crashEvery == 0 {
			// What the checkpoint commits must be on disk before it.
			if err := w.Flush(); err != nil {
				return fail(err)
			}
			if err := logf.Sync(); err != nil {
				return fail(err)
			}
		}
		if err := ck.Step(ctx, step); err != nil {
			return fail(err)
		}
	}
	if err := ck.Save(ctx, step); err != nil {
		return fail(err)
	}
	fmt.Fprintln(w, "done")
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	logf.Close()
	store.Close()
	ds.Close()
	return 0
}

// A child process is SIGKILLed at random moments and restarted from the
// latest checkpoint each time. The rows committed before each last
// checkpoint, concatenated over all restarts and the final run, equal the
// uninterrupted run exactly.
func TestCrashResume(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	kills := 20
	if *soak > 0 {
		kills = *soak
	}
	// Enough batches that the job outlives every kill: each run to be
	// killed streams at most crashSpan batches (it is held there), and 20
	// kills take at most 240 of 316 batches.
	spec := synth.Spec{Files: 4, RowsPerFile: 5000 * max(1, (kills+19)/20), RowGroupRows: 250, Seed: 13}
	data := writeDataset(t, spec)
	tmp := t.TempDir()
	storeDir := filepath.Join(tmp, "store")

	// The uninterrupted run, in process.
	ds := open(t, crashOptions(data))
	var want []int64
	steps := int64(0) // batches in the epoch
	for ids, err := range Map(context.Background(), ds, func(_ context.Context, b arrow.RecordBatch) ([]int64, error) {
		return slices.Clone(b.Column(0).(*array.Int64).Int64Values()), nil
	}) {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ids...)
		steps++
	}

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(17, 19))
	var got []int64
	committed := int64(0) // the step the next run must resume from
	killed := 0
	for run := 0; ; run++ {
		if run > kills*10 {
			t.Fatalf("no end after %d runs", run)
		}
		// A run to be killed is held before the epoch's last batch, so the
		// kill, at a random moment, always comes before the end, however
		// slow the machine. The hold only bounds how far a run gets.
		finishing := killed >= kills
		hold := int64(0)
		if !finishing {
			hold = min(committed+crashSpan, steps-1)
		}
		logPath := filepath.Join(tmp, fmt.Sprintf("run-%d.log", run))
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+strings.Join([]string{data, storeDir, logPath, "10ms", strconv.FormatInt(hold, 10)}, "|"))
		cmd.Stderr = os.Stderr
		gate, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if finishing {
			if err := cmd.Wait(); err != nil {
				t.Fatalf("final run failed: %v", err)
			}
		} else {
			time.Sleep(time.Duration(30+r.IntN(120)) * time.Millisecond)
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			gate.Close()
			killed++
		}

		// Read what this run logged, keep what its last checkpoint committed.
		last := committed
		store, err := pebblestore.Open(storeDir, pebblestore.Options{})
		if err == nil {
			if s, err := store.Latest(context.Background(), crashRun); err == nil {
				last = s
			}
			store.Close()
		}
		entries, start, done := readCrashLog(t, logPath)
		if start >= 0 && start != committed {
			t.Fatalf("run %d resumed at step %d, the last checkpoint was %d", run, start, committed)
		}
		for _, e := range entries {
			if e.step > committed && e.step <= last {
				got = append(got, e.ids...)
			}
		}
		committed = last
		if done {
			break
		}
	}
	if killed < kills {
		t.Fatalf("only %d kills", killed)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("committed rows over %d kills differ from the uninterrupted run: %d rows, want %d", killed, len(got), len(want))
	}
	t.Logf("%d SIGKILLs, %d rows committed exactly", killed, len(got))
}

type crashEntry struct {
	step int64
	ids  []int64
}

func readCrashLog(t *testing.T, path string) (entries []crashEntry, start int64, done bool) {
	start = -1
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, -1, false
	}
	if err != nil {
		t.Fatal(err)
	}
	// The kill may cut the last line short; it is past every checkpoint.
	text := string(data)
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[:i+1]
	} else {
		text = ""
	}
	for line := range strings.Lines(text) {
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
		case fields[0] == "done":
			done = true
		case fields[0] == "start" && len(fields) == 2:
			start, _ = strconv.ParseInt(fields[1], 10, 64)
		default:
			step, err := strconv.ParseInt(fields[0], 10, 64)
			if err != nil {
				continue
			}
			e := crashEntry{step: step}
			for _, s := range fields[1:] {
				id, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					break
				}
				e.ids = append(e.ids, id)
			}
			entries = append(entries, e)
		}
	}
	return entries, start, done
}

// SoakCases is -soak for the value matrix (values_test.go, an external
// test package): the number of cases to run instead of a minute's.
func SoakCases() int { return *soak }
