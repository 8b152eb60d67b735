package engine

import (
	"context"
	"testing"
	"time"

	"github.com/sluicedata/sluice/metrics"
)

// The target is Little's law over what was measured: the decoders' rate
// while they wait for bytes (the rate the stream takes them at otherwise)
// times the latency, doubled; capped by the budget, which the metrics
// then show as holding the stream back.
func TestAheadTarget(t *testing.T) {
	const mib = 1 << 20
	m := metrics.New()
	a := newAhead(Limits{ReadConcurrency: 2, FetchAheadBytes: 100 * mib}, m)
	clock := time.Unix(0, 0)
	a.now = func() time.Time { return clock }
	a.begin()
	ctx := context.Background()

	// Before any fetch returns: the first round, joinAhead windows
	// (8 for 2 decoders), whatever their bytes within the budget.
	for range 8 {
		if !a.allows(10 * mib) {
			t.Fatalf("window %d of the first round refused", a.windows+1)
		}
		if err := a.admit(ctx, 10*mib); err != nil {
			t.Fatal(err)
		}
	}
	if a.allows(10 * mib) {
		t.Fatal("a ninth window admitted before any fetch was out")
	}
	// A fetch out for 10 ms: the first round's rate (2 × 1 GiB/s)
	// over 10 ms, doubled, is 41 MiB: with 80 MiB ahead, nothing more.
	id := a.request()
	clock = clock.Add(10 * time.Millisecond)
	if got, want := a.target(), int64(2*2*aheadFirstRound/100); got != want {
		t.Errorf("10 ms into the first fetch: target %d, want %d", got, want)
	}
	a.fetched(id, true)

	// Fetches take 50 ms; then the decoders take the windows after
	// waiting for them, decoding 10 MiB in 100 ms each: 200 MiB/s for
	// the two.
	for range aheadSamples {
		id := a.request()
		clock = clock.Add(50 * time.Millisecond)
		a.fetched(id, true)
	}
	for range 8 {
		a.took(10*mib, 5*time.Millisecond)
		a.decoded(10*mib, 100*time.Millisecond)
	}
	if got, want := a.target(), int64(2*200*mib/20); got != want {
		t.Errorf("starved decoders of 200 MiB/s, 50 ms fetches: target %d, want %d", got, want)
	}
	if a.bytes != 0 || a.windows != 0 {
		t.Fatalf("after every window was taken: %d bytes in %d windows ahead", a.bytes, a.windows)
	}
	// Not starved for a second: the rate the stream takes bytes at, as
	// measured (80 MiB over the 3.2 s since the iteration began).
	clock = clock.Add(starvedFor)
	if got := a.target(); got >= int64(2*200*mib/20) {
		t.Errorf("fed decoders: target %d, want the stream's own rate's, below the decode rate's", got)
	}

	// Fetches slow to a second: the target is above the budget, which
	// caps what is admitted; the metrics say so.
	a.starved = clock
	for range aheadSamples {
		id := a.request()
		clock = clock.Add(time.Second)
		a.fetched(id, true)
	}
	a.starved = clock
	for a.allows(10 * mib) {
		if err := a.admit(ctx, 10*mib); err != nil {
			t.Fatal(err)
		}
	}
	if a.bytes != 100*mib {
		t.Errorf("admitted %d bytes, want the budget's %d", a.bytes, 100*mib)
	}
	s := m.Snapshot()
	if s.FetchAheadBytes != 100*mib || s.FetchAheadBudgetBytes != 100*mib || s.FetchAheadTargetBytes != int64(2*200*mib) {
		t.Errorf("metrics: %d bytes ahead of a budget of %d, target %d; want 100 MiB, 100 MiB, 400 MiB",
			s.FetchAheadBytes, s.FetchAheadBudgetBytes, s.FetchAheadTargetBytes)
	}
	// The floor: one window a decoder and the next are admitted whatever
	// the bytes, and with nothing ahead, any window.
	b := newAhead(Limits{ReadConcurrency: 2, FetchAheadBytes: 1}, metrics.New())
	b.latencies = []time.Duration{time.Millisecond}
	for i := range 3 {
		if !b.allows(mib) {
			t.Fatalf("budget of 1 byte: window %d refused, want the floor of 3 admitted", i+1)
		}
		b.bytes += mib
		b.windows++
	}
	if b.allows(mib) {
		t.Error("budget of 1 byte: a fourth window admitted")
	}
	if !b.allows(0) {
		t.Error("a window whose bytes an earlier fetch brings refused")
	}
}

// The windows a fetch joins are a function of the options alone; the
// windows in the fetch stage follow FetchConcurrency where it is set.
func TestJoinAheadAndFetchWindows(t *testing.T) {
	for _, c := range []struct {
		l             Limits
		join, windows int
	}{
		{Limits{ReadConcurrency: 1}, 8, maxFetchWindows},
		{Limits{ReadConcurrency: 2}, 8, maxFetchWindows},
		{Limits{ReadConcurrency: 16}, 64, maxFetchWindows},
		{Limits{ReadConcurrency: 16, FetchConcurrency: 3}, 3, 3},
	} {
		if got := c.l.joinAhead(); got != c.join {
			t.Errorf("%+v: joinAhead %d, want %d", c.l, got, c.join)
		}
		if got := c.l.fetchWindows(); got != c.windows {
			t.Errorf("%+v: fetchWindows %d, want %d", c.l, got, c.windows)
		}
	}
}
