package main

import (
	"context"
	"testing"
	"time"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/checkpoint/pebblestore"
)

func TestMeasureSaveLatency(t *testing.T) {
	ctx := context.Background()
	s, err := pebblestore.Open(t.TempDir(), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st := checkpoint.State{
		Version: checkpoint.StateVersion, Plan: "plan", NumSplits: 2, WorldSize: 1,
		Cursors: make([]checkpoint.Cursor, 2),
	}
	st.Fingerprint = st.OrderFingerprint()
	if err := s.Save(ctx, "keep", 0, 0, st); err != nil {
		t.Fatal(err)
	}
	p50, p99, err := measureSaveLatency(ctx, s, "latency-probe", 40, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("synced pebble save: p50 %v, p99 %v", p50, p99)
	if p50 <= 0 || p99 < p50 || p99 > time.Minute {
		t.Fatalf("p50 %v, p99 %v", p50, p99)
	}
	if infos, err := s.List(ctx, "latency-probe"); err != nil || len(infos) != 0 {
		t.Fatalf("measurement left steps %+v, %v", infos, err)
	}
	if infos, err := s.List(ctx, "keep"); err != nil || len(infos) != 1 {
		t.Fatalf("measurement touched another run: %+v, %v", infos, err)
	}
	if _, _, err := measureSaveLatency(ctx, s, "x", 0, st); err == nil {
		t.Fatal("n = 0 accepted")
	}
	bad := st
	bad.Rank = -1
	if _, _, err := measureSaveLatency(ctx, s, "x", 3, bad); err == nil {
		t.Fatal("a merged state was measured")
	}
}

func TestPercentile(t *testing.T) {
	d := make([]time.Duration, 100)
	for i := range d {
		d[i] = time.Duration(i + 1)
	}
	if percentile(d, 50) != 50 || percentile(d, 99) != 99 || percentile(d[:1], 99) != 1 || percentile(d[:3], 50) != 2 {
		t.Fatal("nearest-rank percentiles are off")
	}
}
