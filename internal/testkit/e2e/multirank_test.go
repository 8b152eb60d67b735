package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/internal/testkit/sample"
	"github.com/sluicedata/sluice/internal/testkit/scratch"
	"github.com/sluicedata/sluice/internal/testkit/synth"
)

var (
	multirankKills = flag.Int("multirank.kills", 0, "times TestMultiProcessKill kills the whole job (0: 20, or 6 under -short)")
	multirankSeed  = flag.Uint64("multirank.seed", 0, "seed of the kill points (0: from the clock, logged)")
)

// multirankSpec: 12,000 rows in 24 splits of 500, with row groups of 250
// so that splits start and end inside files.
var multirankSpec = synth.Spec{Files: 6, RowsPerFile: 2000, RowGroupRows: 250, Seed: 3}

const multirankEpochs = 2

// TestMultiProcessKill runs examples/multirank as a job of N OS processes,
// each a rank, against the S3 server; kills the whole job with SIGKILL at
// random points, restarts it at another world size each time (8, 4, 2, 6,
// ...) and checks from the ids each rank logged before each save that every
// row of every epoch was trained on exactly once over the whole run: the
// saves of each start up to the step the next start resumed from count,
// later ones were lost with the kill. A job that finishes before the kills
// are all made is checked and a new one started.
func TestMultiProcessKill(t *testing.T) {
	sc := newScratch(t, scratch.S3)
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "multirank")
	// Built without the race detector: eight processes of it at once on a
	// small machine, started dozens of times; the library's concurrency is
	// raced by the stream package's own tests.
	if out, err := exec.Command("go", "build", "-o", bin, "../../../examples/multirank").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	local := t.TempDir()
	if err := synth.WriteDir(local, multirankSpec); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(local)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(local, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := sc.Bucket.WriteAll(ctx, sc.Key+"data/"+e.Name(), b, nil); err != nil {
			t.Fatal(err)
		}
	}
	u, err := url.Parse(scratch.S3.URL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("prefix", sc.Key+"ckpt/")
	u.RawQuery = q.Encode()
	storeURL := u.String()
	store, err := checkpoint.OpenBucketStoreURL(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	seed := *multirankSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("kill points from -multirank.seed=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	worlds := []int{8, 4, 2, 6}
	// Under -short (CI's race pass) six kills; the pass without the
	// detector makes all twenty: every start is eight processes of a
	// binary built without it, so the detector has nothing here to watch.
	want := *multirankKills
	if want == 0 {
		want = sample.Count(20, 6)
	}
	kills, starts := 0, 0
	for job := 0; kills < want; job++ {
		run := fmt.Sprintf("job-%d", job)
		logDir := t.TempDir()
		var resumed []int64 // the step each start resumed from
		for attempt := 0; ; attempt++ {
			step, err := store.Latest(ctx, run)
			if errors.Is(err, checkpoint.ErrNotFound) {
				step, err = 0, nil
			}
			if err != nil {
				t.Fatal(err)
			}
			resumed = append(resumed, step)
			world := worlds[starts%len(worlds)]
			starts++
			var wait time.Duration
			kill := kills < want
			if kill {
				wait = time.Duration(200+rng.IntN(1300)) * time.Millisecond
			}
			done := startJob(t, bin, world, attempt, sc.URL("data/"), storeURL, run, logDir, wait)
			if !done {
				kills++
				continue
			}
			checkTrainedOnce(t, logDir, resumed)
			t.Logf("%s: %d starts, %d kills so far, every row of %d epochs trained on once", run, attempt+1, kills, multirankEpochs)
			break
		}
	}
}

// startJob runs the job at world size world, killing all its processes
// with SIGKILL after wait (0: never). It reports whether the job finished,
// failing the test if a process failed.
func startJob(t *testing.T, bin string, world, attempt int, data, store, run, logDir string, wait time.Duration) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type proc struct {
		cmd *exec.Cmd
		out strings.Builder
	}
	procs := make([]*proc, world)
	exited := make(chan int, world)
	for r := range world {
		p := &proc{}
		p.cmd = exec.CommandContext(ctx, bin, "--data", data, "--store", store, "--run", run, "--log", logDir,
			"--attempt", strconv.Itoa(attempt), "--num-splits", "24", "--batch-size", "32", "--every", "5",
			"--epochs", strconv.Itoa(multirankEpochs), "--step-time", "10ms")
		p.cmd.Env = append(os.Environ(), "RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(world))
		p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[r] = p
		go func() {
			p.cmd.Wait()
			exited <- r
		}()
	}
	var timer <-chan time.Time
	if wait > 0 {
		timer = time.After(wait)
	}
	left := world
	killed := false
	for left > 0 {
		select {
		case r := <-exited:
			left--
			if !killed && !procs[r].cmd.ProcessState.Success() {
				t.Fatalf("%s start %d (world %d) rank %d: %v\n%s", run, attempt, world, r, procs[r].cmd.ProcessState, procs[r].out.String())
			}
		case <-timer:
			killed = true
			timer = nil
			for _, p := range procs {
				p.cmd.Process.Kill() // SIGKILL; one that already exited answers an error
			}
		case <-ctx.Done():
			t.Fatalf("%s start %d (world %d): still running after 2 minutes", run, attempt, world)
		}
	}
	return !killed
}

type trainedLine struct {
	Resumed *int64  `json:"resumed"`
	Step    int64   `json:"step"`
	Rank    int     `json:"rank"`
	IDs     []int64 `json:"ids"`
}

// checkTrainedOnce reads every start's log and checks that the saves that
// count trained on every row once per epoch. Each start's ranks log first
// the step they resumed from (they must agree); a start's saves count up to
// the step the next start that logged resumed from (all, for the last).
// The steps the test read before each start (seen) are only compared: a
// write that a killed process had sent may land on the server after it died.
func checkTrainedOnce(t *testing.T, logDir string, seen []int64) {
	t.Helper()
	const epochSteps, attemptSteps = 100_000, 10_000_000
	rows := int64(multirankSpec.Files * multirankSpec.RowsPerFile)
	trained := make([][]int, multirankEpochs)
	for e := range trained {
		trained[e] = make([]int, rows)
	}
	type start struct {
		resumed int64
		known   bool
		lines   []trainedLine
		files   []string
	}
	starts := make([]start, len(seen))
	files, err := filepath.Glob(filepath.Join(logDir, "*-rank-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	for _, name := range files {
		var attempt, rank int
		if _, err := fmt.Sscanf(filepath.Base(name), "%d-rank-%d.jsonl", &attempt, &rank); err != nil || attempt >= len(starts) {
			t.Fatalf("log %s: not a start's log (%v)", name, err)
		}
		s := &starts[attempt]
		s.files = append(s.files, name)
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var l trainedLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				continue // the kill can only cut a line whose save never began
			}
			if l.Resumed != nil {
				if s.known && *l.Resumed != s.resumed {
					t.Fatalf("start %d: rank %d resumed from step %d, another rank from %d", attempt, rank, *l.Resumed, s.resumed)
				}
				s.resumed, s.known = *l.Resumed, true
				continue
			}
			s.lines = append(s.lines, l)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	for a := range starts {
		s := &starts[a]
		if !s.known {
			if len(s.lines) > 0 {
				t.Fatalf("start %d saved without logging the step it resumed from", a)
			}
			continue
		}
		if s.resumed != seen[a] {
			t.Logf("start %d resumed from step %d; the store said %d just before it started (a write of the killed start landed late)", a, s.resumed, seen[a])
		}
		upTo := int64(1<<62 - 1)
		for b := a + 1; b < len(starts); b++ {
			if starts[b].known {
				upTo = starts[b].resumed
				break
			}
		}
		for _, l := range s.lines {
			if l.Step <= s.resumed || l.Step > upTo {
				continue
			}
			if l.Step/attemptSteps != int64(a) {
				t.Fatalf("start %d: step %d is not of this start", a, l.Step)
			}
			e := (l.Step % attemptSteps) / epochSteps
			for _, id := range l.IDs {
				if id < 0 || id >= rows || e >= multirankEpochs {
					t.Fatalf("start %d step %d: id %d of epoch %d is outside the data", a, l.Step, id, e)
				}
				trained[e][id]++
			}
		}
	}
	for e := range trained {
		for id, n := range trained[e] {
			if n != 1 {
				t.Fatalf("epoch %d: row %d trained on %d times (steps resumed from, as the store said before each start: %v)", e, id, n, seen)
			}
		}
	}
}
