package engine

import (
	"context"
	"math"
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
	a.cpu = func() (time.Duration, bool) { return 0, true } // idle: every fetch waits
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
	id := a.request(false, 0)
	clock = clock.Add(10 * time.Millisecond)
	if got, want := a.target(), int64(2*2*aheadFirstRound/100); got != want {
		t.Errorf("10 ms into the first fetch: target %d, want %d", got, want)
	}
	a.fetched(id, true)

	// Fetches take 50 ms; then the decoders take the windows after
	// waiting for them, decoding 10 MiB in 100 ms each: 200 MiB/s for
	// the two.
	for range aheadSamples {
		id := a.request(false, 0)
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
		id := a.request(false, 0)
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

// A local file's fetch counts as latency for the part of its time the
// process spent waiting: one that ages while the cores are busy (read by
// CPUs the decoders and the other fetches share) does not open the gate,
// and its time, returned, counts for as little; one the process waited
// for (a cold page cache) counts whole, as a fetch from a bucket always
// does. Counted whole, the busy ones held the
// whole budget ahead in a new process's first pass on a local disk.
func TestAheadCountsWaitingNotRunning(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name  string
		runs  bool    // read by the process's CPUs (a local file)
		bytes int64   // the fetch's
		busy  float64 // of the 2 cores, while the fetches are out
		want  time.Duration
	}{
		{"idle", true, 0, 0, 40 * time.Millisecond},
		{"half busy", true, 0, 0.5, 20 * time.Millisecond},
		{"busy", true, 0, 1, 0},
		{"busier than the cores say", true, 0, 1.5, 0},
		// What a read of its bytes takes counts whole: 10 ms at
		// localReadRate.
		{"busy, 10 MiB", true, 10 * localReadRate / 1000, 1, 10 * time.Millisecond},
		{"idle, 10 MiB", true, 10 * localReadRate / 1000, 0, 40 * time.Millisecond},
		{"busy, 80 MiB", true, 80 * localReadRate / 1000, 1, 40 * time.Millisecond},
		{"a bucket, busy", false, 0, 1, 40 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := metrics.New()
			a := newAhead(Limits{ReadConcurrency: 2, FetchAheadBytes: 1 << 30}, m)
			a.procs = 2
			clock, cpu, reads := time.Unix(0, 0), time.Duration(0), 0
			a.now = func() time.Time { return clock }
			a.cpu = func() (time.Duration, bool) { reads++; return cpu, true }
			a.begin()
			step := func(d time.Duration) {
				clock = clock.Add(d)
				cpu += time.Duration(c.busy * 2 * float64(d))
			}
			id := a.request(c.runs, c.bytes)
			step(40 * time.Millisecond)
			want := int64(aheadHeadroom * 2 * aheadFirstRound * c.want.Seconds())
			if c.want == 0 {
				want = -1 // nothing measured yet
			}
			// Bytes to a duration: a nanosecond off.
			if got := a.target(); math.Abs(float64(got-want)) > 1e-6*math.Abs(float64(want)) {
				t.Errorf("a fetch out 40 ms: target %d, want %d (of %v waited)", got, want, c.want)
			}
			// A bucket's fetch never asks the process's CPU time.
			if !c.runs && reads > 0 {
				t.Errorf("a bucket's fetch out: the CPU time read %d times, want none", reads)
			}
			a.fetched(id, true)
			if got := a.latencies[0]; (got - c.want).Abs() > time.Microsecond {
				t.Errorf("a fetch back after 40 ms: latency %v, want %v", got, c.want)
			}
			// The metrics show the time it took (within their
			// histogram's buckets).
			if got := m.Snapshot().FetchLatencyP50Seconds; math.Abs(got-0.04) > 0.005 {
				t.Errorf("a fetch back after 40 ms: the metrics' latency %vs, want about 0.04s", got)
			}
		})
	}
	// Where the CPU time is not known, the time counts whole.
	a := newAhead(Limits{ReadConcurrency: 2}, metrics.New())
	clock := time.Unix(0, 0)
	a.now = func() time.Time { return clock }
	a.cpu = func() (time.Duration, bool) { return 0, false }
	id := a.request(true, 0)
	clock = clock.Add(30 * time.Millisecond)
	a.fetched(id, true)
	if got := a.latencies[0]; got != 30*time.Millisecond {
		t.Errorf("no CPU clock: latency %v, want 30ms", got)
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
