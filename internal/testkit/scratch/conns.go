package scratch

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/url"
	"os"
	"sync"
	"testing"

	"github.com/sluicedata/sluice/internal/testkit/faults"
	"github.com/sluicedata/sluice/storage"
)

// ReadConns reads an object of inFlight parts of size part through a
// storage.Resolver allowing inFlight requests, all parts at once, rounds
// times, checking every byte, and returns how many connections the rounds
// opened, counted where they arrive: at a proxy in front of the backend's
// server. It skips the test (fails under SLUICE_REQUIRE_OBJECTSTORES=1)
// where the server is not running.
func ReadConns(t *testing.T, be Backend, inFlight, rounds, part int) int {
	t.Helper()
	ctx := context.Background()
	sc := ForTest(t, be, "sluice-conns")
	data := make([]byte, inFlight*part)
	rnd := rand.New(rand.NewPCG(uint64(inFlight), uint64(part)))
	for i := range data {
		data[i] = byte(rnd.Uint32())
	}
	if err := sc.Bucket.WriteAll(ctx, sc.Key+"obj", data, nil); err != nil {
		t.Fatal(err)
	}

	proxy, objURL := sc.Proxied(t, "obj", faults.Answer{SignedHost: be.Name == "S3"})

	r := storage.NewResolver(storage.Options{MaxRequests: inFlight})
	t.Cleanup(func() { r.Close() })
	srcs, err := r.Resolve(ctx, objURL, nil)
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
				t.Fatalf("%s: round %d, read %d: %v", be.Name, round, i, errs[i])
			}
			if !bytes.Equal(got[i], data[i*part:(i+1)*part]) {
				t.Fatalf("%s: round %d, read %d: bytes differ from those written", be.Name, round, i)
			}
		}
	}
	return proxy.Conns() - opened
}

// CheckConnsReused fails the test where 10 rounds of 16 concurrent range
// reads of a backend's object (as many as sluice kept in flight to a bucket
// before Storage.MaxRequests went to 64) open more than a few connections
// more than 16: a client whose idle pool is smaller than a round closes the
// surplus after each round and opens as many anew in the next.
func CheckConnsReused(t *testing.T, be Backend) {
	t.Helper()
	const inFlight, rounds = 16, 10
	n := ReadConns(t, be, inFlight, rounds, 64<<10)
	t.Logf("%d rounds of %d concurrent reads opened %d connections", rounds, inFlight, n)
	// A few more than the reads in flight is slack for timing.
	if n > inFlight+4 {
		t.Errorf("%d rounds of %d concurrent reads opened %d connections, want at most %d", rounds, inFlight, n, inFlight+4)
	}
}

// Proxied starts a proxy to the backend's server that throttles with answer
// (none yet), and returns it with key's URL through it.
func (p *Prefix) Proxied(t *testing.T, key string, answer faults.Answer) (*faults.Proxy, string) {
	t.Helper()
	u, err := url.Parse(p.URL(key))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	var target string
	switch p.backend.Name {
	case "S3":
		target = q.Get("endpoint")
	case "Azure":
		target = q.Get("protocol") + "://" + q.Get("domain")
	case "GCS":
		target = "http://" + os.Getenv("STORAGE_EMULATOR_HOST")
	}
	proxy, err := faults.NewProxy(target, answer, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	switch p.backend.Name {
	case "S3":
		q.Set("endpoint", "http://"+proxy.Addr)
	case "Azure":
		q.Set("domain", proxy.Addr)
	case "GCS":
		t.Setenv("STORAGE_EMULATOR_HOST", proxy.Addr) // the GCS driver's only way to an emulator
	}
	u.RawQuery = q.Encode()
	return proxy, u.String()
}
