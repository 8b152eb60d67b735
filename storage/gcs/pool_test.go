package gcs_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluicedata/sluice/internal/testkit/faults"
	"github.com/sluicedata/sluice/internal/testkit/scratch"
	"github.com/sluicedata/sluice/storage"
)

// Rounds of as many concurrent range reads as sluice keeps in flight to a
// bucket reuse their connections: Go's default transport keeps 2 idle per
// host, so each round after the first opened 14 new ones (a TCP and, on real
// GCS, a TLS handshake each). Counted where the connections arrive, at a
// proxy in front of the emulator; every byte read is checked.
func TestConcurrentReadsReuseConnections(t *testing.T) {
	if scratch.GCS.URL() == "" {
		if os.Getenv("SLUICE_REQUIRE_OBJECTSTORES") == "1" {
			t.Fatal(scratch.GCS.Missing() + " (SLUICE_REQUIRE_OBJECTSTORES=1 makes this an error)")
		}
		t.Skip(scratch.GCS.Missing())
	}
	ctx := context.Background()
	sc, err := scratch.New(ctx, scratch.GCS, "sluice-gcs-pool")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sc.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	const inFlight, rounds, part = 16, 10, 64 << 10
	data := make([]byte, inFlight*part)
	rnd := rand.New(rand.NewPCG(47, 2))
	for i := range data {
		data[i] = byte(rnd.Uint32())
	}
	if err := sc.Bucket.WriteAll(ctx, sc.Key+"obj", data, nil); err != nil {
		t.Fatal(err)
	}

	proxy, err := faults.NewProxy("http://"+os.Getenv("STORAGE_EMULATOR_HOST"), faults.Answer{}, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	t.Setenv("STORAGE_EMULATOR_HOST", proxy.Addr)
	r := storage.NewResolver(storage.Options{MaxRequests: inFlight})
	defer r.Close()
	srcs, err := r.Resolve(ctx, sc.URL("obj"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) != 1 {
		t.Fatalf("resolved %d objects, want 1", len(srcs))
	}
	src := srcs[0]
	opened := proxy.Conns()
	for round := range rounds {
		var wg sync.WaitGroup
		errs := make([]error, inFlight)
		got := make([][]byte, inFlight)
		for i := range inFlight {
			wg.Go(func() {
				got[i] = make([]byte, part)
				_, errs[i] = src.Bucket.ReadAt(ctx, src.Object, got[i], int64(i*part))
			})
		}
		wg.Wait()
		for i := range inFlight {
			if errs[i] != nil {
				t.Fatalf("round %d, read %d: %v", round, i, errs[i])
			}
			if !bytes.Equal(got[i], data[i*part:(i+1)*part]) {
				t.Fatalf("round %d, read %d: bytes differ from those written", round, i)
			}
		}
	}
	// A connection or two more than the reads in flight is slack for
	// timing; the default pool needs some 16 + 9 × 14.
	n := proxy.Conns() - opened
	t.Logf("%d rounds of %d concurrent reads opened %d connections", rounds, inFlight, n)
	if n > inFlight+4 {
		t.Errorf("%d rounds of %d concurrent reads opened %d connections, want at most %d", rounds, inFlight, n, inFlight+4)
	}
}
