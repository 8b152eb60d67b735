package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/checkpoint/pebblestore"
	"github.com/sluicedata/sluice/stream"
)

// TestCheckpointMix: ls, show and rm read a run that stream.MixCheckpointer
// wrote: steps 5 and 10 of a two-rank mix complete, step 20 with rank 0's
// state alone.
func TestCheckpointMix(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ckpt")
	store, err := pebblestore.Open(dir, pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var taken [2]int64 // rows each rank took by step 10
	for rank := range 2 {
		var src []stream.MixSource
		for k, w := range []float64{0.7, 0.3} {
			ds, err := stream.Open(ctx, stream.Options{URLs: []string{dataDir}, Columns: []string{"id"}, Shuffle: true, Seed: uint64(k), NumSplits: 4, BatchSize: 100})
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			src = append(src, stream.MixSource{Dataset: ds, Weight: w})
		}
		m, err := stream.Mix(src, stream.MixOptions{Seed: 5, BatchSize: 50, Rank: rank, WorldSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		ck := stream.NewMixCheckpointer(m, store, "mixrun", 5)
		ck.Incarnation = "job-1"
		step := int64(0)
		for b, err := range m.Batches(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			step++
			if step <= 10 {
				taken[rank] += b.NumRows()
			}
			if err := ck.Step(ctx, step); err != nil {
				t.Fatal(err)
			}
			if step == 20-int64(rank) { // rank 1 stops before saving step 20
				break
			}
		}
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	out := ok(t, "checkpoint", "ls", "--run", "mixrun", dir)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || strings.Contains(out, "magic") {
		t.Fatalf("ls: want a header and 4 steps, no decoding error:\n%s", out)
	}
	for i, want := range []string{"5  complete mix", "10  complete mix", "15  complete mix", "20  incomplete mix"} {
		if !strings.Contains(lines[i+1], want) {
			t.Errorf("ls line %d %q lacks %q", i+1, lines[i+1], want)
		}
	}
	if !strings.Contains(lines[4], "missing") {
		t.Errorf("ls: step 20's reason:\n%s", out)
	}
	var steps []stepView
	if err := json.Unmarshal([]byte(ok(t, "checkpoint", "ls", "--json", "--run", "mixrun", dir)), &steps); err != nil || len(steps) != 4 {
		t.Fatalf("ls --json: %v, %d steps", err, len(steps))
	}
	if s := steps[1]; s.Kind != "mix" || !s.Complete || s.RowsTaken == nil || *s.RowsTaken != taken[0]+taken[1] || s.Incarnation != "job-1" || s.WorldSize != 2 {
		t.Errorf("ls --json step 10: %+v (rows %v), want %d rows", s, s.RowsTaken, taken[0]+taken[1])
	}

	var v mixShowView
	if err := json.Unmarshal([]byte(ok(t, "checkpoint", "show", "--json", "--run", "mixrun", "--step", "10", dir)), &v); err != nil {
		t.Fatal(err)
	}
	if v.Sources != 2 || v.NumSplits != 4 || len(v.Splits) != 4 || len(v.RankStates) != 2 || v.Fingerprint == "" {
		t.Fatalf("show --json: %+v", v)
	}
	var rows int64
	for _, s := range v.Splits {
		if !s.Known || s.Rank != s.Split%2 || len(s.Taken) != 2 || s.Taken[0]+s.Taken[1] != s.Rows {
			t.Errorf("split %+v: its sources' rows taken should sum to its rows (one pass, epoch 0)", s)
		}
		rows += s.Rows
	}
	if rows != taken[0]+taken[1] {
		t.Errorf("show: splits hold %d rows, the ranks took %d", rows, taken[0]+taken[1])
	}
	text := ok(t, "checkpoint", "show", "--run", "mixrun", dir)
	for _, w := range []string{"a mix's", "step:            15 (newest complete step)", "sources:         2", "incarnation:     job-1", "SOURCE 0 TAKEN", "SOURCE 1 TAKEN"} {
		if !strings.Contains(text, w) {
			t.Errorf("show lacks %q:\n%s", w, text)
		}
	}
	if text := ok(t, "checkpoint", "show", "--run", "mixrun", "--step", "20", dir); !strings.Contains(text, "incomplete") {
		t.Errorf("show --step 20:\n%s", text)
	}

	out = ok(t, "checkpoint", "rm", "--run", "mixrun", "--keep", "2", dir)
	if !strings.Contains(out, "deleted step 5") {
		t.Errorf("rm --keep 2: %s", out)
	}
	if err := json.Unmarshal([]byte(ok(t, "checkpoint", "ls", "--json", "--run", "mixrun", dir)), &steps); err != nil || len(steps) != 3 || steps[0].Step != 10 {
		t.Errorf("after rm: %+v, %v", steps, err)
	}
}

// TestCheckpointEpochBoundary: ranks saved where one had finished its
// epoch and the other had not; the step is complete, and ls and show say
// which epoch each split is in.
func TestCheckpointEpochBoundary(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := checkpoint.OpenBucketStoreURL(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	opts := stream.Options{URLs: []string{dataDir}, Columns: []string{"id"}, NumSplits: 2, WorldSize: 2, BatchSize: 100}
	for rank, batches := range []int{3, -1} {
		o := opts
		o.Rank = rank
		ds, err := stream.Open(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, err := range ds.Batches(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			if n++; n == batches {
				break
			}
		}
		if err := store.Save(ctx, "exp", 7, rank, ds.StateDict()); err != nil {
			t.Fatal(err)
		}
		ds.Close()
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	out := ok(t, "checkpoint", "ls", "--run", "exp", "file://"+dir)
	if !strings.Contains(out, "complete") || !strings.Contains(out, "0-1") || strings.Contains(out, "incomplete") {
		t.Errorf("ls:\n%s", out)
	}
	var v showView
	if err := json.Unmarshal([]byte(ok(t, "checkpoint", "show", "--json", "--run", "exp", "file://"+dir)), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Cursors) != 2 || v.Cursors[0].Epoch != 0 || v.Cursors[1].Epoch != 1 || *v.Epoch != 0 || v.LastEpoch == nil || *v.LastEpoch != 1 {
		t.Errorf("show: %+v", v)
	}
}
