package prefetch

import (
	"context"
	"iter"
	"math"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// pipe is one iteration of a stage. Three kinds of goroutine share it:
//
//   - the feeder ranges over upstream and puts items into the window;
//   - Concurrency workers take items in order, call Fn and store the results;
//   - the consumer (the goroutine ranging over Map's iterator) takes results in order.
//
// Items are numbered from 0 in input order. Item i lives in slots[i%len(slots)] from the moment
// it is taken until it is yielded, and the counters split the items seen so far into
//
//	[0, yielded)        handed to the consumer
//	[yielded, started)  in Fn, or done and waiting (slot.done tells which)
//	[started, taken)    pending: taken from upstream, waiting for a worker
//
// with yielded <= started <= taken <= yielded+Ahead, which is what makes the ring big enough.
// Items start in order, so a result can only be yielded once every earlier item has started.
//
// One mutex guards all of it. Each kind of goroutine waits on its own condition variable so a
// change wakes only the goroutines it can unblock; the feeder and the consumer are alone on
// theirs, and a worker that takes an item passes the signal on if another item can start.
type pipe[T, U any] struct {
	st     Stage[T, U]     // with defaults applied
	parent context.Context // the context given to Map: its end ends the iteration with its error
	ctx    context.Context // given to Fn: cancelled when the iteration ends, for any reason
	cancel context.CancelFunc

	// stopWatch and watched undo the watch on parent: see stop.
	stopWatch func() bool
	watched   chan struct{}

	wg sync.WaitGroup // the feeder and the workers

	mu        sync.Mutex
	feedCond  sync.Cond // the feeder waits for room in the window
	workCond  sync.Cond // workers wait for an item they may start
	readyCond sync.Cond // the consumer waits for the next result in order

	slots   []slot[T, U]
	yielded int
	// taking mirrors yielded for [Waited], which reads it without the lock.
	taking  atomic.Int64
	started int
	taken   int

	// failed is the lowest index whose Fn call failed, or math.MaxInt. The iteration will end
	// there, so nothing after it is started or taken.
	failed int

	// ended is set when upstream has no more items; the iteration ends with endErr (nil for a
	// clean end) once the consumer has taken the first `taken` results.
	ended  bool
	endErr error

	// stopping is set when the iteration ends or the parent context is done: nothing new is
	// taken or started, and every goroutine heads for the exit.
	stopping bool

	// ready and readyBytes count the results done and waiting for the consumer, for MaxBytes
	// and Hooks.Queue.
	ready      int
	readyBytes int64
}

// slot holds one item of the window, as input and then as result.
type slot[T, U any] struct {
	in   T // from taken until started, then zeroed so the stage keeps no reference to it
	out  U // from done until yielded
	size int64
	err  error
	done bool // Fn has returned: out, size and err are set
}

// start allocates an iteration's state and starts its goroutines.
func start[T, U any](parent context.Context, in iter.Seq2[T, error], st Stage[T, U]) *pipe[T, U] {
	p := &pipe[T, U]{
		st:      st,
		parent:  parent,
		slots:   make([]slot[T, U], st.Ahead),
		failed:  math.MaxInt,
		watched: make(chan struct{}),
	}
	p.ctx, p.cancel = context.WithCancel(parent)
	p.feedCond.L = &p.mu
	p.workCond.L = &p.mu
	p.readyCond.L = &p.mu

	// Cancelling the parent must wake goroutines blocked on the condition variables, which know
	// nothing of contexts.
	p.stopWatch = context.AfterFunc(parent, func() {
		defer close(p.watched)
		p.mu.Lock()
		p.halt()
		p.mu.Unlock()
	})

	p.wg.Add(1 + st.Concurrency)
	go p.feed(in)
	for range st.Concurrency {
		go p.work()
	}
	return p
}

// halt makes every goroutine stop at its next check and wakes those that wait. p.mu is held.
func (p *pipe[T, U]) halt() {
	p.stopping = true
	p.feedCond.Broadcast()
	p.workCond.Broadcast()
	p.readyCond.Broadcast()
}

// stop ends the iteration: it stops and joins every goroutine, then releases what was taken and
// not yielded. Called once, by the consumer, when it leaves the iterator for any reason.
func (p *pipe[T, U]) stop() {
	if !p.stopWatch() {
		// The watch has fired; its goroutine must be gone before the iteration returns.
		<-p.watched
	}
	p.mu.Lock()
	p.halt()
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()

	// Every goroutine has exited, so the state is ours alone and nothing is running: every item
	// between yielded and started is done. An item whose Fn failed has no result to release.
	var zeroIn T
	var zeroOut U
	for i := p.yielded; i < p.taken; i++ {
		s := &p.slots[i%len(p.slots)]
		switch {
		case i >= p.started:
			if p.st.ReleaseIn != nil {
				p.st.ReleaseIn(s.in)
			}
		case s.err == nil:
			if p.st.ReleaseOut != nil {
				p.st.ReleaseOut(s.out)
			}
		}
		s.in, s.out = zeroIn, zeroOut
	}
	if p.ready != 0 || p.readyBytes != 0 {
		p.ready, p.readyBytes = 0, 0
		if p.st.Hooks.Queue != nil {
			p.st.Hooks.Queue(0, 0)
		}
	}
}

// open reports whether item i may be taken or started under MaxBytes. p.mu is held.
func (p *pipe[T, U]) open(i int) bool {
	// i == p.yielded is the item the consumer waits for, which must never be held back or the
	// stage would deadlock. Items start in order, so when it has not started no later result
	// exists and readyBytes is 0 anyway; the explicit clause keeps the guarantee from resting on
	// that argument alone.
	return p.st.MaxBytes == 0 || p.readyBytes <= p.st.MaxBytes || i == p.yielded
}

// canTake reports whether the feeder may pull the next item from upstream. p.mu is held.
func (p *pipe[T, U]) canTake() bool {
	return p.taken-p.yielded < len(p.slots) && p.open(p.taken)
}

// canStart reports whether a worker may start the next pending item. p.mu is held.
func (p *pipe[T, U]) canStart() bool {
	return p.started < p.taken && p.started < p.failed && p.open(p.started)
}

// feed pulls items from upstream into the window, never holding more than the window allows: it
// waits for room before each pull rather than after, so an item is never taken that the window
// cannot hold.
//
// The lock is not held while upstream computes its next item, which can take long (upstream may
// be another stage), nor therefore when upstream panics.
func (p *pipe[T, U]) feed(in iter.Seq2[T, error]) {
	defer p.wg.Done()
	defer func() {
		// A panic in upstream would otherwise crash the process from this goroutine, out of
		// the caller's reach; it ends the iteration instead, in order, like an error.
		if v := recover(); v != nil {
			p.mu.Lock()
			p.end(&PanicError{Stage: p.st.Name, Index: p.taken, Input: true, Value: v, Stack: debug.Stack()})
			p.mu.Unlock()
		}
	}()

	p.mu.Lock()
	more := p.waitRoom()
	p.mu.Unlock()
	if !more {
		return
	}
	for v, err := range in {
		if !p.put(v, err) {
			return
		}
	}
	p.mu.Lock()
	p.end(nil)
	p.mu.Unlock()
}

// put stores an item pulled from upstream, or the error that ends it, and waits for room for the
// next one. It reports whether the feeder should pull again.
func (p *pipe[T, U]) put(v T, err error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.end(err)
		return false
	}
	// Room was made before this pull. The item is stored even when the stage is stopping, so
	// that stop releases it with the others.
	p.slots[p.taken%len(p.slots)].in = v
	p.taken++
	if p.canStart() {
		p.workCond.Signal()
	}
	return p.waitRoom()
}

// waitRoom waits until the feeder may take the next item, and reports false if it must stop
// instead. p.mu is held.
func (p *pipe[T, U]) waitRoom() bool {
	for !p.stopping && p.failed == math.MaxInt && !p.canTake() {
		p.feedCond.Wait()
	}
	return !p.stopping && p.failed == math.MaxInt
}

// end records that upstream has no items after the taken ones, and why. p.mu is held.
func (p *pipe[T, U]) end(err error) {
	p.ended, p.endErr = true, err
	if p.yielded == p.taken {
		p.readyCond.Signal()
	}
}

// work runs Fn on pending items, in order, until the stage stops.
func (p *pipe[T, U]) work() {
	defer p.wg.Done()
	var zero T
	p.mu.Lock()
	for {
		for !p.stopping && !p.canStart() {
			p.workCond.Wait()
		}
		if p.stopping {
			break
		}
		i := p.started
		s := &p.slots[i%len(p.slots)]
		in := s.in
		s.in = zero
		p.started++
		if p.canStart() {
			p.workCond.Signal()
		}
		p.mu.Unlock()

		var t0 time.Time
		if p.st.Hooks.Done != nil {
			t0 = time.Now()
		}
		out, size, err := p.call(i, in)
		if p.st.Hooks.Done != nil {
			p.st.Hooks.Done(time.Since(t0), size)
		}

		p.mu.Lock()
		// Stored even when stopping: stop releases the result.
		s.out, s.size, s.err, s.done = out, size, err, true
		if err != nil {
			if i < p.failed {
				p.failed = i
				p.feedCond.Signal() // the feeder can stop pulling
			}
		} else {
			p.ready++
			p.readyBytes += size
			p.reportQueue()
		}
		if i == p.yielded {
			p.readyCond.Signal()
		}
	}
	p.mu.Unlock()
}

// call runs Fn (and Size) on item i, turning a panic into an error.
func (p *pipe[T, U]) call(i int, in T) (out U, size int64, err error) {
	defer func() {
		if v := recover(); v != nil {
			var zero U
			out, size = zero, 0
			err = &PanicError{Stage: p.st.Name, Index: i, Value: v, Stack: debug.Stack()}
		}
	}()
	ctx := p.ctx
	if p.st.Waited {
		ctx = context.WithValue(ctx, waitedKey{}, turn{i: int64(i), next: &p.taking})
	}
	out, err = p.st.Fn(ctx, in)
	if err != nil {
		var zero U
		return zero, 0, &ItemError{Stage: p.st.Name, Index: i, Err: err}
	}
	if p.st.Size != nil {
		size = p.st.Size(out)
	}
	return out, size, nil
}

// next waits for the next step of the iteration: a result (ok, nil error), the error that ends it
// (ok, non-nil error), or its clean end (!ok).
func (p *pipe[T, U]) next() (out U, err error, ok bool) {
	var t0 time.Time
	p.mu.Lock()
	for {
		if p.ended && p.yielded == p.taken {
			err, ok = p.endErr, p.endErr != nil
			break
		}
		// Checked on every step, not only when waiting, so that a consumer whose results are
		// always ready still sees its cancellation at once.
		if err = p.parent.Err(); err != nil {
			ok = true
			break
		}
		s := &p.slots[p.yielded%len(p.slots)]
		if s.done {
			var zero U
			out, err, ok = s.out, s.err, true
			s.out, s.err, s.done = zero, nil, false
			p.yielded++
			p.taking.Store(int64(p.yielded))
			if err == nil {
				p.ready--
				p.readyBytes -= s.size
				p.reportQueue()
			}
			// Room in the window, and fewer bytes waiting.
			if p.canTake() {
				p.feedCond.Signal()
			}
			if p.canStart() {
				p.workCond.Signal()
			}
			break
		}
		if t0.IsZero() && p.st.Hooks.Wait != nil {
			t0 = time.Now()
		}
		p.readyCond.Wait()
	}
	p.mu.Unlock()

	if p.st.Hooks.Wait != nil {
		var d time.Duration
		if !t0.IsZero() {
			d = time.Since(t0)
		}
		p.st.Hooks.Wait(d)
	}
	return out, err, ok
}

// reportQueue calls Hooks.Queue with the current figures. p.mu is held.
func (p *pipe[T, U]) reportQueue() {
	if p.st.Hooks.Queue != nil {
		p.st.Hooks.Queue(p.ready, p.readyBytes)
	}
}
