package stream

import (
	"context"
	"flag"
	"fmt"
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
	"github.com/sluicedata/sluice/internal/testkit/steplog"
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
	log, err := steplog.Create(logPath, step, crashEvery)
	if err != nil {
		return fail(err)
	}
	transform := func(_ context.Context, b arrow.RecordBatch) ([]int64, error) {
		return slices.Clone(b.Column(0).(*array.Int64).Int64Values()), nil
	}
	for ids, err := range Map(ctx, ds, transform) {
		if err != nil {
			return fail(err)
		}
		steplog.HoldAt(step, hold)
		time.Sleep(delay) // the training step
		step++
		if err := log.Step(step, ids); err != nil {
			return fail(err)
		}
		if err := ck.Step(ctx, step); err != nil {
			return fail(err)
		}
	}
	if err := ck.Save(ctx, step); err != nil {
		return fail(err)
	}
	if err := log.Done(); err != nil {
		return fail(err)
	}
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
		logged, err := steplog.Read(logPath)
		if err != nil {
			t.Fatal(err)
		}
		if logged.Start >= 0 && logged.Start != committed {
			t.Fatalf("run %d resumed at step %d, the last checkpoint was %d", run, logged.Start, committed)
		}
		got = logged.Committed(got, committed, last)
		committed = last
		if logged.Done {
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

// SoakCases is -soak for the value matrix (values_test.go, an external
// test package): the number of cases to run instead of a minute's.
func SoakCases() int { return *soak }
