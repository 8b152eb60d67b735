package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedata/sluice/internal/testkit/scratch"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/internal/testkit/trips"
	"github.com/sluicedata/sluice/stream"
)

// timedTransport waits delay before every request, as a store far away
// answers, and records when each was sent and answered.
type timedTransport struct {
	base  http.RoundTripper
	delay time.Duration
	mu    sync.Mutex
	log   []timedRequest
}

type timedRequest struct {
	what       string // "list", "get PATH" (no range) or "range PATH"
	start, end time.Time
}

func (t *timedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	what := "get " + req.URL.Path
	switch {
	case req.URL.Query().Has("list-type"):
		what = "list"
	case req.Method != http.MethodGet:
		what = strings.ToLower(req.Method) + " " + req.URL.Path
	case req.Header.Get("Range") != "":
		what = "range " + req.URL.Path
	}
	start := time.Now()
	time.Sleep(t.delay)
	resp, err := t.base.RoundTrip(req)
	t.mu.Lock()
	t.log = append(t.log, timedRequest{what: what, start: start, end: time.Now()})
	t.mu.Unlock()
	return resp, err
}

func (t *timedTransport) take() []timedRequest {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.log
	t.log = nil
	return out
}

func roundTrips(reqs []timedRequest) int {
	spans := make([]trips.Span, len(reqs))
	for i, r := range reqs {
		spans[i] = trips.Span{Sent: r.start, Answered: r.end}
	}
	return trips.Count(spans)
}

// A rank that plans from a shared plan starts in one round trip: the
// listing of its files and the read of the plan go out together, and its
// first batch needs no other request than its data's.
func TestSharedPlanOneRoundTrip(t *testing.T) {
	sc := newScratch(t, scratch.S3)
	ctx := context.Background()
	spec := synth.Spec{Files: 3, RowsPerFile: 2000, RowGroupRows: 250, Seed: 23}
	if err := synth.WriteBucket(ctx, sc.Bucket, sc.Key+"data/", spec); err != nil {
		t.Fatal(err)
	}
	// Long beside the time a rank takes to open its data's bucket before
	// it lists (up to a quarter of a second under the race detector on a
	// loaded machine), so that one round trip is not taken for two.
	const delay = 600 * time.Millisecond
	tr := &timedTransport{base: http.DefaultTransport, delay: delay}
	planKey := sc.Key + "plan"
	options := func(rank int, rt http.RoundTripper) stream.Options {
		plans, err := s3Opener(rt)(ctx, scratch.S3.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { plans.Close() })
		o := stream.Options{URLs: []string{sc.URL("data/")}, Rank: rank, WorldSize: 4, NumSplits: 8, BatchSize: 100, Allocator: checkedAllocator(t)}
		o.PlanStore = &stream.PlanStore{Bucket: plans, Key: planKey}
		o.Storage.Open = s3Opener(rt)
		return o
	}
	planner := open(t, options(0, nil))

	// Rank 1's requests, each delayed, its plan's too.
	o := options(1, tr)
	tr.take()
	ds := open(t, o)
	opening := tr.take()
	if ds.Fingerprint() != planner.Fingerprint() {
		t.Fatalf("rank 1 fingerprint %s, the planner's %s", ds.Fingerprint(), planner.Fingerprint())
	}
	var kinds []string
	for _, r := range opening {
		kinds = append(kinds, strings.Replace(r.what, "/"+planBucketName(t)+"/"+planKey, "PLAN", 1))
	}
	slices.Sort(kinds)
	if want := []string{"get PLAN", "list"}; !slices.Equal(kinds, want) {
		t.Fatalf("rank 1 made %q opening, want %q: the listing and the plan, and no footer", kinds, want)
	}
	if n := roundTrips(opening); n != 1 {
		t.Fatalf("rank 1 waited %d round trips opening, want 1 (the listing and the plan read at once): %s", n, describeRequests(opening))
	}
	for _, err := range ds.Batches(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	for _, r := range tr.take() {
		if !strings.HasPrefix(r.what, "range ") || !strings.Contains(r.what, "/data/") {
			t.Fatalf("rank 1's first batch made %s: the plan holds its footers", r.what)
		}
	}
}

func planBucketName(t *testing.T) string {
	u := scratch.S3.URL()
	name, _, _ := strings.Cut(strings.TrimPrefix(u, "s3://"), "?")
	if name == "" {
		t.Fatalf("no bucket in %s", u)
	}
	return name
}

func describeRequests(reqs []timedRequest) string {
	t0 := slices.MinFunc(reqs, func(a, b timedRequest) int { return a.start.Compare(b.start) }).start
	var b strings.Builder
	for _, r := range reqs {
		fmt.Fprintf(&b, "%s from %v to %v; ", r.what, r.start.Sub(t0).Round(time.Millisecond), r.end.Sub(t0).Round(time.Millisecond))
	}
	return b.String()
}
