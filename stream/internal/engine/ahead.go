package engine

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/sluicedata/sluice/internal/cputime"
	"github.com/sluicedata/sluice/metrics"
)

// How far the fetch stage reads ahead follows Little's law: to keep the
// decoders fed, the stored bytes requested and not yet taken by a decoder
// must be the rate the stream takes bytes times the time a request takes.
// A fixed number of windows cannot be right for every store: 8 windows ran
// at 0.68 of the 0 ms rate with every read 20 ms away on the reference
// machine, took 7 round trips for an epoch that needs one 100 ms away
// (TestFetchAheadFollowsLatency), and at 0 ms only held memory. So the
// fetch stage admits a window while the bytes ahead stay under a target
// that it keeps computing from what it measures:
//
//	target = aheadHeadroom × rate × latency
//
// where latency is a high quantile of the recent fetches' durations (request
// to bytes in memory, waits for Storage.MaxRequests included), or the age
// of the oldest fetch in flight where that is longer (a lower bound on the
// latency known before any fetch returns, and as soon as requests slow
// down), and rate is the bytes per second the decoders take from the fetch
// stage; while they
// wait for bytes that rate is the fetch stage's own, not the demand, so it
// is then the rate the decoders decode at (their busy time's), which is
// what they would take if fed. The consumer's pace reaches the rate through
// backpressure: a slow training loop leaves the decoded queue full, the
// decoders take fewer windows, and the target shrinks with them.
//
// The target never exceeds Limits.FetchAheadBytes, the budget: a target
// above it is what the metrics show as the budget holding the stream back
// (metrics.Snapshot.Advice). The next window in order is always admitted,
// as are the windows that keep every decoder busy (ahead.floor), whatever
// the bytes: the stream never stalls on its bound.
//
// What was learned lives on the engine, so that the next epoch's iteration
// starts with the depth the last one ended at rather than a cold guess.
//
// A local file's fetch (Engine.runsLocally) counts as latency, returned
// or still out, only for the part of its time the process spent waiting
// rather than running, and at least for what a read of its bytes takes at
// localReadRate (ahead.waited). A local file is read by the CPU: on a busy
// machine its fetches take long because they share the cores with each
// other, with the decoders and with the page faults of fresh memory, and
// more windows ahead only make that worse. Counted whole, that time opened
// the gate further as it grew: the first epoch of a new process on the
// bench's pyarrow files (2 cores) held the whole 256 MiB budget ahead, its
// first fetches out for 40-300 ms, and ran at about 5M rows/s on 3 s of
// CPU; counted so, at 11-12M on 1.3-1.4 s, and the epochs after it as
// fast as before. A DataLoader worker is such a new process, every epoch
// where the workers are not persistent. A local file that is not in
// memory (a cold page cache, a network file system) is waited for, the
// process idle, and counts whole; a fetch from a bucket always counts
// whole, as a process busy with other work (a training step) still waits
// for the bucket.
const (
	// aheadHeadroom covers the spread of latencies and decode times the
	// quantile and the rate leave out: at 1, a request slower than the
	// quantile would leave a decoder waiting.
	aheadHeadroom = 2
	// aheadQuantile is the latency quantile the target is sized for.
	aheadQuantile = 0.9
	// aheadSamples is how many recent fetches the latency is taken over.
	aheadSamples = 64
	// aheadPrior is the decode rate per decoder assumed, in stored bytes a
	// second, from the first fetch's return until one window has been
	// decoded: the rounds sized by it then hide the latency measured where
	// the decoders turn out to be that fast, and cost at most the budget
	// where they are slower (the target follows the measured rate from
	// the first decode).
	aheadPrior = 256 << 20
	// aheadFirstRound is the decode rate per decoder the first round is
	// sized for, before any fetch has returned (the age of the oldest
	// then being the latency known). It errs high, as erring low costs a
	// round trip and erring high only memory, and that only while no fetch
	// has returned: a local disk answers before the round passes its
	// first windows (0.4 ms into a shuffled read of the bench's files on a
	// loaded 2-core machine). The bench's rows decode at some 0.9 GB/s a
	// core on a quiet one; sized for 256 MiB/s, its first round at 20 ms
	// left half the epoch to a second round trip, and at 50 and 100 ms
	// went out over 34 ms (TestFetchAheadHidesFirstRoundTrip). Once a
	// fetch has returned aheadPrior takes over: a loaded machine's first
	// decodes take long, and sized for 1 GiB/s meanwhile the rounds held
	// the bench's memory_4x heap at 1.5 times memory_1x's.
	aheadFirstRound = 1 << 30
	// maxFetchWindows bounds the windows the fetch stage holds where
	// Limits.FetchConcurrency does not: the goroutines it starts per
	// iteration. 128 windows of the default shuffle window of small
	// numeric columns are some 300 MB, over the default budget.
	maxFetchWindows = 128
	// aheadTick is how often a waiting admission looks again while
	// fetches are in flight: their age raises the latency it sizes for.
	aheadTick = 2 * time.Millisecond
	// rateEvery is the least interval a rate is measured over.
	rateEvery = 50 * time.Millisecond
	// starvedFor is how long after the decoders last waited for bytes the
	// target is sized by their decode rate.
	starvedFor = time.Second
	// starvedWait is the least wait for a fetched window that counts as
	// the decoders starved: shorter ones are a goroutine hand-over.
	starvedWait = 500 * time.Microsecond
	// localReadRate is the rate, in bytes a second, at which a fetch from
	// a local file counts whole however busy the process was (waited): a
	// read from the page cache or a local disk is about that fast, and
	// on a quiet machine the stream so holds ahead what it did before it
	// told waiting from running (1.4 ms a fetch of the bench's 5 MB
	// windows, some 6 MB ahead).
	localReadRate = 1 << 30
)

// joinAhead is the number of windows whose pieces a fetch may join
// (Fetches.Ahead): Limits.FetchConcurrency where set, else max(8, 4 ×
// ReadConcurrency), the count that used to be the read-ahead as well. It is
// a function of the options alone, so the requests a job makes do not
// depend on timing.
func (l Limits) joinAhead() int {
	if l.FetchConcurrency > 0 {
		return l.FetchConcurrency
	}
	return max(8, 4*l.ReadConcurrency)
}

// fetchWindows is the most windows the fetch stage holds at once.
func (l Limits) fetchWindows() int {
	if l.FetchConcurrency > 0 {
		return l.FetchConcurrency
	}
	return maxFetchWindows
}

// ahead is the fetch stage's admission of windows by bytes (see above): one
// per engine, its counts reset at each iteration, its estimates kept.
type ahead struct {
	budget   int64
	floor    int // windows always admitted: one per decoder and one ready
	first    int // windows admitted before any fetch has returned
	decoders int
	m        *metrics.Pipeline
	now      func() time.Time

	mu sync.Mutex
	// changed is closed and replaced whenever bytes are released or the
	// target moves, waking a waiting admission.
	changed chan struct{}
	bytes   int64 // admitted, not yet taken by a decoder
	windows int
	// latencies are the durations of the last aheadSamples fetches, a ring
	// at next.
	latencies []time.Duration
	next      int
	// pending holds the start of every fetch in flight, by a number of
	// its own.
	pending map[uint64]pendingFetch
	// cpu is the process's CPU time (cputime.Process), and procs the cores it
	// runs on, for waited.
	cpu   func() (time.Duration, bool)
	procs int
	ids   uint64
	// taken and since measure the rate the decoders take bytes at; rate is
	// the last measurement, in bytes a second.
	taken int64
	since time.Time
	rate  float64
	// decodedBytes and decodeTime are the decoders' work, for their rate
	// per decoder while busy (busyRate, bytes a second).
	decodedBytes int64
	decodeTime   time.Duration
	busyRate     float64
	starved      time.Time
}

func newAhead(l Limits, m *metrics.Pipeline) *ahead {
	return &ahead{budget: l.FetchAheadBytes, floor: l.ReadConcurrency + 1, first: l.joinAhead(), decoders: max(l.ReadConcurrency, 1),
		m: m, now: time.Now, changed: make(chan struct{}), pending: map[uint64]pendingFetch{},
		cpu: cputime.Process, procs: runtime.GOMAXPROCS(0)}
}

// pendingFetch is a fetch in flight: when it went out, and, for a fetch
// that runs on this process's CPUs, the process's CPU time then (cpuKnown
// false for others, and where that is not measured).
type pendingFetch struct {
	at       time.Time
	cpu      time.Duration
	cpuKnown bool
	// whole is how long the fetch counts whole however busy the process
	// was: its bytes at localReadRate.
	whole time.Duration
}

// begin starts an iteration: nothing is ahead yet.
func (a *ahead) begin() {
	a.mu.Lock()
	a.bytes, a.windows = 0, 0
	a.taken, a.since = 0, a.now()
	a.report()
	a.mu.Unlock()
}

// target is the bytes the fetch stage should hold ahead of the decoders,
// uncapped by the budget. a.mu is held.
func (a *ahead) target() int64 {
	var lat time.Duration
	if len(a.latencies) > 0 {
		lat = quantile(a.latencies, aheadQuantile)
	}
	now := a.now()
	// The process's CPU time is read (a system call) only where a fetch
	// out is read by its CPUs: a bucket's fetches count whole.
	cpu, cpuKnown := time.Duration(0), false
	for _, p := range a.pending {
		if p.cpuKnown {
			cpu, cpuKnown = a.cpu()
			break
		}
	}
	for _, p := range a.pending {
		lat = max(lat, a.waited(p, now, cpu, cpuKnown))
	}
	if lat == 0 {
		return -1 // nothing measured yet
	}
	rate := a.rate
	if first := len(a.latencies) == 0; first || !a.starved.IsZero() && now.Sub(a.starved) < starvedFor {
		busy := a.busyRate
		switch {
		case busy > 0:
		case first:
			busy = aheadFirstRound
		default:
			busy = aheadPrior
		}
		rate = max(rate, busy*float64(a.decoders))
	}
	return int64(aheadHeadroom * rate * lat.Seconds())
}

// waited is the part of pending fetch p's age that the process spent
// waiting rather than running, from the CPU time it used meanwhile (cpu,
// now), and at least as much of it as a read of its bytes takes
// (pendingFetch.whole): all of it where that is not measured, or p waits
// on a bucket.
func (a *ahead) waited(p pendingFetch, now time.Time, cpu time.Duration, cpuKnown bool) time.Duration {
	age := now.Sub(p.at)
	if !cpuKnown || !p.cpuKnown || age <= 0 {
		return age
	}
	busy := float64(cpu-p.cpu) / (float64(age) * float64(max(a.procs, 1)))
	idle := time.Duration(float64(age) * min(max(1-busy, 0), 1))
	return max(idle, min(age, p.whole))
}

// admit waits until a window whose fetch brings n new bytes may start, or
// ctx ends.
func (a *ahead) admit(ctx context.Context, n int64) error {
	for {
		a.mu.Lock()
		if a.allows(n) {
			a.bytes += n
			a.windows++
			a.report()
			a.mu.Unlock()
			return nil
		}
		wake := a.changed
		var tick *time.Timer
		var ticked <-chan time.Time
		// While fetches are out, or before the first has returned (its
		// request may not be recorded yet), their age may open the gate.
		if len(a.pending) > 0 || len(a.latencies) == 0 {
			tick = time.NewTimer(aheadTick)
			ticked = tick.C
		}
		a.mu.Unlock()
		select {
		case <-wake:
		case <-ticked:
		case <-ctx.Done():
			return ctx.Err()
		}
		if tick != nil {
			tick.Stop()
		}
	}
}

// allows reports whether a window of n new bytes may start now. a.mu is
// held.
func (a *ahead) allows(n int64) bool {
	if n <= 0 || a.windows < a.floor || a.bytes == 0 {
		return true
	}
	if a.windows < a.first && len(a.latencies) == 0 {
		// Before the first fetch returns, little is known of the
		// latency: the first round is as many windows as a fetch may
		// join, as it always was, and more as the wait grows.
		return a.bytes+n <= a.budget
	}
	return a.bytes+n <= min(a.budget, a.target())
}

// request records a fetch of n stored bytes going out, for fetched to say
// it returned; runs says it is read by this process's CPUs (see waited).
func (a *ahead) request(runs bool, n int64) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ids++
	p := pendingFetch{at: a.now()}
	if runs {
		p.cpu, p.cpuKnown = a.cpu()
		p.whole = time.Duration(float64(n) / localReadRate * float64(time.Second))
	}
	a.pending[a.ids] = p
	return a.ids
}

// fetched records that fetch id returned; ok says whether it brought its
// bytes (a failed one's time says nothing of the latency).
func (a *ahead) fetched(id uint64, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, found := a.pending[id]
	delete(a.pending, id)
	if !found || !ok {
		return
	}
	now := a.now()
	a.m.AddFetchLatency(now.Sub(p.at)) // the metrics show the time it took
	cpu, cpuKnown := time.Duration(0), false
	if p.cpuKnown {
		cpu, cpuKnown = a.cpu()
	}
	d := a.waited(p, now, cpu, cpuKnown)
	if len(a.latencies) < aheadSamples {
		a.latencies = append(a.latencies, d)
	} else {
		a.latencies[a.next] = d
	}
	a.next = (a.next + 1) % aheadSamples
	a.wake()
}

// took records a decoder taking a window that brought n bytes, after
// waiting waited for it.
func (a *ahead) took(n int64, waited time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	a.bytes -= n
	a.windows--
	a.taken += n
	if el := now.Sub(a.since); el >= rateEvery {
		r := float64(a.taken) / el.Seconds()
		if a.rate == 0 {
			a.rate = r
		} else {
			a.rate = (a.rate + r) / 2
		}
		a.taken, a.since = 0, now
	}
	if waited >= starvedWait {
		a.starved = now
	}
	a.report()
	a.wake()
}

// decoded records a decoder's work on a window of n stored bytes.
func (a *ahead) decoded(n int64, d time.Duration) {
	a.mu.Lock()
	a.decodedBytes += n
	a.decodeTime += d
	if a.decodeTime > 0 {
		a.busyRate = float64(a.decodedBytes) / a.decodeTime.Seconds()
	}
	// Weigh the recent more: halve the sums once they hold a few
	// seconds of work, so that a machine that slows down is followed.
	if a.decodeTime > 4*time.Second {
		a.decodedBytes, a.decodeTime = a.decodedBytes/2, a.decodeTime/2
	}
	a.mu.Unlock()
}

// wake tells waiting admissions that something changed. a.mu is held.
func (a *ahead) wake() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// report sets the metrics' gauges. a.mu is held.
func (a *ahead) report() {
	a.m.SetFetchAhead(a.bytes, max(a.target(), 0), a.budget)
}

// quantile is the q quantile of ds (nearest rank).
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(int(q*float64(len(s))), len(s)-1)
	return s[i]
}
