package iceberg_test

import (
	"bufio"
	"context"
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

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/checkpoint/pebblestore"
	"github.com/sluicedata/sluice/formats/iceberg"
	"github.com/sluicedata/sluice/internal/testkit/steplog"
	"github.com/sluicedata/sluice/stream"
)

// The kill test's child, run as this test binary with killChildEnv set
// ("metadata|store|log|delay|hold"): it opens the table (its plan cached in
// the checkpoint store), streams it shuffled in four splits, checkpoints
// every killEvery batches into the pebble store and logs each batch's ids
// as "step id id ...", flushed before every checkpoint. It says
// "committed step" on stdout once a checkpoint is stored, and once past
// step hold (if not 0) it waits on stdin, which the parent never closes
// before the kill: the run cannot reach the end of the epoch.
const (
	killChildEnv = "SLUICE_ICEBERG_KILL_CHILD"
	killEvery    = 4
	killRun      = "iceberg"
	// killSpan is the most batches a killed run may stream, so that every
	// kill comes before the end of the epoch (90 batches, 8 kills).
	killSpan = 3 * killEvery
)

func killOptions() stream.Options {
	return stream.Options{
		Columns:       []string{"id"},
		BatchSize:     64,
		Shuffle:       true,
		Seed:          23,
		ShuffleWindow: 500,
		NumSplits:     4,
		Limits:        stream.Limits{PrefetchBatches: 8},
	}
}

func killChild() int {
	args := strings.Split(os.Getenv(killChildEnv), "|")
	metaLoc, storeDir, logPath := args[0], args[1], args[2]
	delay, _ := time.ParseDuration(args[3])
	hold, _ := strconv.ParseInt(args[4], 10, 64)
	ctx := context.Background()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "kill child:", err)
		return 1
	}
	store, err := pebblestore.Open(storeDir, pebblestore.Options{})
	if err != nil {
		return fail(err)
	}
	defer store.Close()
	cache, err := store.KV("plan")
	if err != nil {
		return fail(err)
	}
	tbl, err := iceberg.Open(ctx, metaLoc, iceberg.Options{Cache: cache})
	if err != nil {
		return fail(err)
	}
	defer tbl.Close()
	o := killOptions()
	o.Plan, o.PlanCache = tbl.Plan, cache
	ds, err := stream.Open(ctx, o)
	if err != nil {
		return fail(err)
	}
	defer ds.Close()
	ck := stream.NewCheckpointer(ds, store, killRun, killEvery)
	step, err := ck.Resume(ctx)
	if err != nil {
		return fail(err)
	}
	log, err := steplog.Create(logPath, step, killEvery)
	if err != nil {
		return fail(err)
	}
	defer log.Close()
	for b, err := range ds.Batches(ctx) {
		if err != nil {
			return fail(err)
		}
		ids := slices.Clone(b.Column(0).(*array.Int64).Int64Values())
		b.Release()
		steplog.HoldAt(step, hold)
		time.Sleep(delay) // the training step
		step++
		if err := log.Step(step, ids); err != nil {
			return fail(err)
		}
		if err := ck.Step(ctx, step); err != nil {
			return fail(err)
		}
		if step%killEvery == 0 {
			fmt.Printf("committed %d\n", step)
		}
	}
	if err := ck.Save(ctx, step); err != nil {
		return fail(err)
	}
	if err := log.Done(); err != nil {
		return fail(err)
	}
	return 0
}

// A process streaming a table with position and equality deletes is
// SIGKILLed mid-epoch, again and again, and resumed each time from its
// pebble checkpoint (the table's plan from the same store). The rows its
// checkpoints committed, over every run, are the uninterrupted run's in
// its order, and so the table's live rows, each once.
func TestKillResume(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	const kills = 8
	tbl, live := deletesTable(t, 6000)
	metaLoc := tbl.MetadataLocation()
	tmp := t.TempDir()
	storeDir := filepath.Join(tmp, "store")

	// The uninterrupted run, in process.
	o := killOptions()
	o.Plan = tbl.Plan
	ds, err := stream.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	steps := int64(0) // batches in the epoch
	for b, err := range ds.Batches(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, b.Column(0).(*array.Int64).Int64Values()...)
		b.Release()
		steps++
	}
	ds.Close()
	sorted := slices.Sorted(slices.Values(want))
	if !slices.Equal(sorted, live) {
		t.Fatalf("the uninterrupted run gave %d rows, not the table's %d live ones once each", len(want), len(live))
	}

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(29, 31))
	var got []int64
	committed := int64(0) // the step the next run must resume from
	killed, midway := 0, 0
	for run := 0; ; run++ {
		if run > kills*10 {
			t.Fatalf("no end after %d runs", run)
		}
		// A run to be killed is held before the epoch's last batch, and
		// killed a while after its first checkpoint, while it streams: so
		// every kill comes mid-epoch after progress, however slow the
		// machine. The hold only bounds how far a run gets before the kill.
		hold := int64(0)
		if killed < kills {
			hold = min(committed+killSpan, steps-1)
			if hold < committed+killEvery {
				t.Fatalf("an epoch of %d batches is too short for %d kills", steps, kills)
			}
		}
		logPath := filepath.Join(tmp, fmt.Sprintf("run-%d.log", run))
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), killChildEnv+"="+strings.Join([]string{metaLoc, storeDir, logPath, "5ms", strconv.FormatInt(hold, 10)}, "|"))
		cmd.Stderr = os.Stderr
		gate, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if hold == 0 {
			io.Copy(io.Discard, stdout)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("final run failed: %v", err)
			}
		} else {
			first := firstCommit(stdout)
			if first < 0 {
				t.Fatalf("run %d ended before its first checkpoint: %v", run, cmd.Wait())
			}
			// Any moment from the first checkpoint to the hold, at the
			// child's 5 ms a batch: a slower child is caught at the hold.
			time.Sleep(time.Duration(r.Int64N((hold-first)*5+1)) * time.Millisecond)
			cmd.Process.Signal(syscall.SIGKILL)
			io.Copy(io.Discard, stdout)
			cmd.Wait()
			gate.Close()
			killed++
		}

		last := committed
		store, err := pebblestore.Open(storeDir, pebblestore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if s, err := store.Latest(context.Background(), killRun); err == nil {
			last = s
		}
		store.Close()
		logged, err := steplog.Read(logPath)
		if err != nil {
			t.Fatal(err)
		}
		if logged.Start != committed {
			t.Fatalf("run %d resumed at step %d, the last checkpoint was %d", run, logged.Start, committed)
		}
		got = logged.Committed(got, committed, last)
		if !logged.Done && last > committed && len(got) < len(want) {
			midway++ // killed after it committed some of the epoch, before its end
		}
		committed = last
		if logged.Done {
			break
		}
	}
	if midway < kills-1 {
		t.Fatalf("only %d of %d kills came mid-epoch after progress", midway, killed)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("committed rows over %d kills differ from the uninterrupted run: %d rows, want %d", killed, len(got), len(want))
	}
	t.Logf("%d SIGKILLs (%d mid-epoch after progress), %d rows committed exactly", killed, midway, len(got))
}

// firstCommit reads the child's stdout up to its first "committed step"
// and returns that step, or -1 if the child ended before it.
func firstCommit(stdout io.Reader) int64 {
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if n, ok := strings.CutPrefix(sc.Text(), "committed "); ok {
			if step, err := strconv.ParseInt(n, 10, 64); err == nil {
				return step
			}
		}
	}
	return -1
}
