package metrics

import (
	"sync"
	"time"
)

// windowSteps is how many steps a window moves in. Ten keep a window's length within a tenth of
// Options.Window for eleven marks of memory.
const windowSteps = 10

// window integrates the queue depths over time and, at every step (a tenth of the window), keeps a
// mark of where the integrals and counters stood. The figures of the last window are the
// difference between now and the oldest mark kept, so they cost a fixed amount of memory however
// many batches pass, and a snapshot reads them in constant time.
//
// Queue depths change in steps, so integrating them exactly needs only the depth since the last
// change and the time of that change: every change (and every snapshot) first adds depth × time
// elapsed, then sets the new depth.
type window struct {
	mu   sync.Mutex
	step time.Duration

	raw, prefetch int       // the depths since at
	at            time.Time // the integrals below cover [start, at]
	// rawArea and prefetchArea are the integrals of the depths since New, in item-seconds:
	// divided by a length of time they give the mean depth over it.
	rawArea, prefetchArea float64
	// waitNanos is the consumer's waiting reported so far, as AddConsumerWait counts it, and
	// startNanos the part of it AddStartWait reported.
	waitNanos, startNanos int64

	// steady is what SetSteady last said. rawSteady, prefetchSteady and steadySeconds integrate
	// the depths, and time, over steady time only: the means the diagnosis reads.
	steady                    bool
	rawSteady, prefetchSteady float64
	steadySeconds             float64

	// marks is a ring: marks[(head+i)%len(marks)] is the i-th oldest of the n kept. With
	// windowSteps+1 marks, the oldest is between windowSteps and windowSteps+1 steps old once
	// the ring is full.
	marks   [windowSteps + 1]mark
	head, n int
	next    time.Time // when the next mark is due
}

// mark is where the integrals and counters stood at one step.
type mark struct {
	at                    time.Time
	rawArea, prefetchArea float64
	// waitNanos is the consumer's waiting before at, including the part before at of waits
	// reported after it: a wait is only reported when it ends, so addWait moves it into the
	// marks it straddles. startNanos is the part of it at iterations' starts.
	waitNanos, startNanos int64
	// The steady integrals at at.
	rawSteady, prefetchSteady, steadySeconds float64
	// The counters are read when the mark is made, which is at the first update or snapshot
	// after its step: counts are placed in the right step only to within the gap between
	// updates. They only tell whether anything moved, where that is precise enough.
	batches, fetchNanos, transformNanos int64
}

func (w *window) init(start time.Time, length time.Duration) {
	w.steady = true
	w.step = max(length/windowSteps, 1)
	w.at = start
	w.push(mark{at: start})
	w.next = start.Add(w.step)
}

// setDepth integrates up to now, then sets one of the depths to items.
func (p *Pipeline) setDepth(depth *int, items int) {
	w := &p.win
	w.mu.Lock()
	p.advance(p.now())
	*depth = items
	w.mu.Unlock()
}

// addWait counts a wait of d that ended now; start says it was for an iteration's first batch.
func (p *Pipeline) addWait(d time.Duration, start bool) {
	w := &p.win
	w.mu.Lock()
	defer w.mu.Unlock()
	now := p.now()
	p.advance(now)
	w.waitNanos += int64(d)
	if start {
		w.startNanos += int64(d)
	}
	began := now.Add(-d)
	for i := range w.n {
		m := &w.marks[(w.head+i)%len(w.marks)]
		if m.at.After(began) {
			// m.at is not after now, so this part is at most d.
			m.waitNanos += int64(m.at.Sub(began))
			if start {
				m.startNanos += int64(m.at.Sub(began))
			}
		}
	}
}

// setSteady integrates up to now, then sets whether the queues are steady.
func (p *Pipeline) setSteady(steady bool) {
	w := &p.win
	w.mu.Lock()
	p.advance(p.now())
	w.steady = steady
	w.mu.Unlock()
}

// advance brings the integrals up to now, making the marks of the steps passed on the way.
// w.mu is held.
func (p *Pipeline) advance(now time.Time) {
	w := &p.win
	if now.Before(w.at) {
		// A clock without a monotonic reading can step back; time is never integrated
		// backwards.
		now = w.at
	}
	if !now.Before(w.next) {
		// After a silence longer than the window, the marks of all but its last steps would
		// be dropped as soon as they were made: skip them, integrating over the gap at once.
		due := int(now.Sub(w.next)/w.step) + 1
		if skip := due - len(w.marks); skip > 0 {
			w.next = w.next.Add(time.Duration(skip) * w.step)
		}
		for !now.Before(w.next) {
			w.integrate(w.next)
			w.push(mark{
				at:             w.next,
				rawArea:        w.rawArea,
				prefetchArea:   w.prefetchArea,
				waitNanos:      w.waitNanos,
				startNanos:     w.startNanos,
				rawSteady:      w.rawSteady,
				prefetchSteady: w.prefetchSteady,
				steadySeconds:  w.steadySeconds,
				batches:        p.consumedBatches.Load(),
				fetchNanos:     p.fetchNanos.Load(),
				transformNanos: p.transformNanos.Load(),
			})
			w.next = w.next.Add(w.step)
		}
	}
	w.integrate(now)
}

// integrate adds the current depths over [w.at, t].
func (w *window) integrate(t time.Time) {
	dt := t.Sub(w.at).Seconds()
	w.rawArea += float64(w.raw) * dt
	w.prefetchArea += float64(w.prefetch) * dt
	if w.steady {
		w.rawSteady += float64(w.raw) * dt
		w.prefetchSteady += float64(w.prefetch) * dt
		w.steadySeconds += dt
	}
	w.at = t
}

// push adds a mark, dropping the oldest when the ring is full.
func (w *window) push(m mark) {
	if w.n < len(w.marks) {
		w.marks[(w.head+w.n)%len(w.marks)] = m
		w.n++
		return
	}
	w.marks[w.head] = m
	w.head = (w.head + 1) % len(w.marks)
}

// recent returns the figures from the oldest mark to now. w.mu is held and advance(now) done.
func (p *Pipeline) recent(now time.Time) Recent {
	w := &p.win
	from := w.marks[w.head]
	secs := now.Sub(from.at).Seconds()
	if secs <= 0 {
		return Recent{}
	}
	r := Recent{
		Seconds:             secs,
		SteadySeconds:       w.steadySeconds - from.steadySeconds,
		RawQueueItems:       (w.rawArea - from.rawArea) / secs,
		PrefetchQueueItems:  (w.prefetchArea - from.prefetchArea) / secs,
		ConsumerWaitSeconds: time.Duration(w.waitNanos - from.waitNanos).Seconds(),
		StartWaitSeconds:    time.Duration(w.startNanos - from.startNanos).Seconds(),
		ConsumedBatches:     p.consumedBatches.Load() - from.batches,
		FetchSeconds:        time.Duration(p.fetchNanos.Load() - from.fetchNanos).Seconds(),
		TransformSeconds:    time.Duration(p.transformNanos.Load() - from.transformNanos).Seconds(),
	}
	if r.SteadySeconds > 0 {
		r.RawQueueItems = (w.rawSteady - from.rawSteady) / r.SteadySeconds
		r.PrefetchQueueItems = (w.prefetchSteady - from.prefetchSteady) / r.SteadySeconds
	}
	return r
}
