package iceberg_test

import (
	"bufio"
	"context"
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

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/checkpoint/pebblestore"
	"github.com/sluicedata/sluice/formats/iceberg"
	"github.com/sluicedata/sluice/stream"
)

// The kill test's child, run as this test binary with killChildEnv set
// ("metadata|store|log|delay"): it opens the table (its plan cached in
// the checkpoint store), streams it shuffled in four splits, checkpoints
// every killEvery batches into the pebble store and logs each batch's ids
// as "step id id ...", flushed before every checkpoint.
const (
	killChildEnv = "SLUICE_ICEBERG_KILL_CHILD"
	killEvery    = 4
	killRun      = "iceberg"
)

func killOptions() stream.Options {
	return stream.Options{
		Columns:         []string{"id"},
		BatchSize:       64,
		Shuffle:         true,
		Seed:            23,
		ShuffleWindow:   500,
		NumSplits:       4,
		PrefetchBatches: 8,
	}
}

func killChild() int {
	args := strings.Split(os.Getenv(killChildEnv), "|")
	metaLoc, storeDir, logPath := args[0], args[1], args[2]
	delay, _ := time.ParseDuration(args[3])
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
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fail(err)
	}
	defer logf.Close()
	w := bufio.NewWriter(logf)
	fmt.Fprintf(w, "start %d\n", step)
	if err := w.Flush(); err != nil { // the parent times its kill from here
		return fail(err)
	}
	for b, err := range ds.Batches(ctx) {
		if err != nil {
			return fail(err)
		}
		ids := slices.Clone(b.Column(0).(*array.Int64).Int64Values())
		b.Release()
		time.Sleep(delay) // the training step
		step++
		fmt.Fprintf(w, "%d", step)
		for _, id := range ids {
			fmt.Fprintf(w, " %d", id)
		}
		fmt.Fprintln(w)
		if step%killEvery == 0 {
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
	for b, err := range ds.Batches(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, b.Column(0).(*array.Int64).Int64Values()...)
		b.Release()
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
		logPath := filepath.Join(tmp, fmt.Sprintf("run-%d.log", run))
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), killChildEnv+"="+strings.Join([]string{metaLoc, storeDir, logPath, "5ms"}, "|"))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var exitErr error
		if killed >= kills {
			if exitErr = <-exited; exitErr != nil {
				t.Fatalf("final run failed: %v", exitErr)
			}
		} else {
			// Killed a while after its first checkpoint of the run, while
			// it streams.
			started := waitProgress(t, logPath, exited)
			if started {
				select {
				case exitErr = <-exited:
				case <-time.After(time.Duration(r.IntN(80)) * time.Millisecond):
					cmd.Process.Signal(syscall.SIGKILL)
					<-exited
					killed++
				}
			} else {
				exitErr = <-exited
			}
			if !started && exitErr != nil {
				t.Fatalf("run %d failed before it started: %v", run, exitErr)
			}
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
		entries, start, done := readKillLog(t, logPath)
		if start != committed {
			t.Fatalf("run %d resumed at step %d, the last checkpoint was %d", run, start, committed)
		}
		for _, e := range entries {
			if e.step > committed && e.step <= last {
				got = append(got, e.ids...)
			}
		}
		if !done && last > committed && len(got) < len(want) {
			midway++ // killed after it committed some of the epoch, before its end
		}
		committed = last
		if done {
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

// waitProgress waits until the child has logged a batch after its start
// (its log is flushed at each checkpoint), or has exited.
func waitProgress(t *testing.T, logPath string, exited chan error) bool {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(logPath); err == nil && strings.Count(string(b), "\n") >= 2 {
			return true
		}
		select {
		case err := <-exited:
			exited <- err // for the caller
			return false
		case <-time.After(2 * time.Millisecond):
		}
	}
	t.Fatal("the child made no progress within two minutes")
	return false
}

type killEntry struct {
	step int64
	ids  []int64
}

func readKillLog(t *testing.T, path string) (entries []killEntry, start int64, done bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The kill may cut the last line short; it is past every checkpoint.
	text := string(data)
	text = text[:strings.LastIndexByte(text, '\n')+1]
	start = -1
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "start":
			start, _ = strconv.ParseInt(f[1], 10, 64)
		case f[0] == "done":
			done = true
		default:
			e := killEntry{}
			if e.step, err = strconv.ParseInt(f[0], 10, 64); err != nil {
				t.Fatalf("%s: %q", path, line)
			}
			for _, s := range f[1:] {
				id, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					t.Fatalf("%s: %q", path, line)
				}
				e.ids = append(e.ids, id)
			}
			entries = append(entries, e)
		}
	}
	return entries, start, done
}
