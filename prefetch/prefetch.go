// Package prefetch runs one step of a data pipeline ahead of its consumer: a few goroutines apply a
// function to the items of an iterator while the consumer works on earlier results, and the
// consumer receives the results in exactly the order of the input, whatever the timing.
//
// # Model
//
// [Map] applies a [Stage] to an upstream iterator. It takes items from upstream into a window of at
// most Stage.Ahead items; Stage.Concurrency goroutines call Stage.Fn on the items of the window,
// starting them in input order; a result waits in the window until every earlier one has been
// yielded. The window moves on only when the consumer takes its oldest result, so a slow consumer
// stops the stage from pulling upstream (backpressure), and a stage never holds more than Ahead
// inputs and results however fast upstream and Fn are. Stage.MaxBytes further bounds the bytes of
// finished results that wait for the consumer.
//
// Stages chain: the output of one Map is the input of the next, and each keeps its own bounds. A
// sluice stream runs three, because their work differs in kind and each needs its own
// concurrency:
//
//	fetched := prefetch.Map(ctx, reads, fetch)            // I/O: stored bytes of windows, many in flight
//	windows := prefetch.Map(ctx, fetched, decode)         // CPU: Arrow batches, a goroutine per core
//	batches := prefetch.Map(ctx, cut(windows), transform) // CPU: cut batches, run the user's Map
//
// What each does, and what its queue holds:
//
//   - fetch reads the stored bytes of windows (runs of rows). Its calls wait on storage, so many
//     run at once to hide latency; its Ahead is as many, and MaxBytes bounds the bytes fetched
//     and not yet decoded.
//   - decode turns fetched bytes into Arrow record batches. Its finished results are the
//     stream's raw queue: decoded windows not yet cut into batches.
//   - transform cuts batches out of decoded windows (a slice, or a gather when shuffled) and
//     runs the user's Map function on each. Its finished results are the prefetch queue:
//     batches ready for the training loop.
//
// The [Hooks] of each stage feed the stream's metrics: Done adds fetch and decode time, or
// transform time, summed over goroutines; Queue sets the depth of the raw queue (decode) or the
// prefetch queue (transform); Wait, on the last stage, adds the time the training loop spent
// blocked for a batch. A stage that cannot keep up leaves the queue after it empty and, by
// backpressure, the one before it full, which is how the metrics tell which stage limits a
// stream.
//
// # Ending
//
// An iteration ends when upstream ends, at the first error, or when the consumer stops ranging.
// Errors arrive in input order: every result before the failing item is yielded first. An error
// from upstream is passed on unchanged; an error from Fn is wrapped with the stage's name and the
// item's index; a panic in Fn becomes a [*PanicError]; a cancelled context ends the iteration with
// ctx.Err(). Whatever the reason, before the range statement returns, Map cancels the context of
// running Fn calls, stops pulling upstream (so upstream's own clean-up runs) and waits for all its
// goroutines to exit: no goroutine outlives an iteration.
//
// # Ownership
//
// An item taken from upstream belongs to the stage until Fn is called with it, and from then on to
// Fn. A result belongs to the stage until it is yielded, and from then on to the consumer. Whatever
// the stage still owns when an iteration ends is handed to Stage.ReleaseIn or Stage.ReleaseOut,
// exactly once each, so buffers such as Arrow record batches can be reference counted through a
// pipeline that stops anywhere.
package prefetch

import (
	"context"
	"fmt"
	"iter"
	"sync/atomic"
	"time"
)

// Stage describes one step of a pipeline: the function applied to each item, how many goroutines
// apply it, how far ahead of the consumer it may run, and how to give back what is never
// consumed. The zero value of every field but Fn is a valid default.
type Stage[T, U any] struct {
	// Name identifies the stage in errors, e.g. "fetch", "decode" or "transform".
	//
	// The default is "stage".
	Name string

	// Concurrency is the number of goroutines calling Fn, hence the most Fn calls that run at once.
	//
	// The default (any value < 1) is 1.
	Concurrency int

	// Ahead is the most items the stage holds at once: items taken from upstream and not yet
	// yielded, whether they wait for a goroutine, are in Fn, or are done and wait for the
	// consumer. It is the depth of the stage's queue: the larger it is, the longer a burst of slow
	// items the stage can absorb, and the more memory it holds.
	//
	// The default (any value < 1) is 2*Concurrency. Values below Concurrency are raised to
	// Concurrency, as fewer items than goroutines would leave goroutines idle.
	Ahead int

	// MaxBytes bounds the memory of finished results waiting for the consumer, as measured by
	// Size: while their total exceeds MaxBytes, the stage starts no new Fn call and takes no new
	// item from upstream. Calls already running finish, so the total can exceed MaxBytes by the
	// results of up to Concurrency calls. The item the consumer waits for is never held back
	// (the stage starts items in order, so when it has not started nothing later is waiting
	// either): MaxBytes slows a stage down but cannot deadlock it, even when a single result is
	// larger than MaxBytes.
	//
	// The default (any value < 1), or a nil Size, means no limit but Ahead.
	MaxBytes int64

	// Size returns the bytes held by a result, for MaxBytes and Hooks. It is called once per
	// successful Fn call, on the goroutine that ran Fn. It must not panic: if it does, the
	// result is dropped without ReleaseOut and the iteration ends with a [*PanicError].
	//
	// The default (nil) counts every result as 0 bytes.
	Size func(U) int64

	// Fn computes the result of one item. It runs on up to Concurrency goroutines at once and
	// must be safe for that. Its context is cancelled when the iteration ends early (the consumer
	// stops, an error, or the context given to Map is cancelled); Fn should return soon after.
	//
	// Fn owns its input: the stage neither releases nor reuses it once Fn is called. If Fn returns
	// an error, its result is discarded without ReleaseOut. A panic in Fn (or Size) is recovered
	// and ends the iteration with a [*PanicError].
	//
	// Fn is required; Map panics if it is nil.
	Fn func(ctx context.Context, in T) (U, error)

	// ReleaseIn gives back an item taken from upstream that never reached Fn, because the
	// iteration ended first. It is called exactly once per such item, after all the stage's
	// goroutines have exited, on the goroutine ranging over Map's result.
	//
	// The default (nil) drops such items.
	ReleaseIn func(T)

	// ReleaseOut gives back a result Fn returned that will never be yielded, because the iteration
	// ended first. It is called exactly once per such result, like ReleaseIn.
	//
	// The default (nil) drops such results.
	ReleaseOut func(U)

	// Hooks report what the stage does, for metrics.
	//
	// The default (all nil) reports nothing and costs nothing.
	Hooks Hooks

	// Waited makes [Waited] answer for the contexts Fn is given, so that Fn can spend more
	// goroutines on the item the consumer waits for than on the others. It costs a context per
	// item, which is why it is off unless asked for.
	//
	// The default (false) leaves Waited false for every item.
	Waited bool
}

// waitedKey is the context key of an item's [turn].
type waitedKey struct{}

// turn is where an item stands: its index, and the index the consumer takes next.
type turn struct {
	i    int64
	next *atomic.Int64
}

// Waited reports whether the consumer waits for the item whose Fn was given ctx: every item
// before it has been yielded, so nothing more reaches the consumer until this one is done. While
// several items are in Fn at once, the consumer gets its next result soonest if that one's work
// goes on more goroutines than the others'; a Fn whose work splits (the columns of a batch, say)
// can ask, at each step, whether its item is that one now. It is false for a context of a stage
// without Stage.Waited, and for any other context.
func Waited(ctx context.Context) bool {
	t, ok := ctx.Value(waitedKey{}).(turn)
	return ok && t.next.Load() == t.i
}

// Hooks let a caller watch a stage, typically to feed gauges and counters. Every field may be
// nil. Hooks are called from the stage's goroutines, some with the stage's lock held: they must
// be cheap, safe for concurrent use, and must not call back into the stage or block.
type Hooks struct {
	// Done is called after every Fn call, with its wall time and the Size of its result (0 if
	// Fn failed or Size is nil). With Concurrency > 1 the times of calls overlap, so their sum
	// can grow faster than the wall clock.
	Done func(elapsed time.Duration, size int64)

	// Queue is called after every change in the results that are done and wait for the
	// consumer, with their number and total Size; at the end of an iteration it reports (0, 0).
	// It is called with the stage's lock held, so calls never overtake each other and the last
	// report is the current state: a gauge it sets is never stale. A queue that stays near Ahead
	// means the consumer is the bottleneck; near 0, the stage (or upstream) is.
	Queue func(ready int, bytes int64)

	// Wait is called once per step of the iteration (each result, the error, or the end) with the
	// time the consumer spent blocked inside the iterator waiting for it, 0 if it was ready.
	// Their sum is the time the consumer could not proceed because the stage was behind.
	Wait func(d time.Duration)
}

// Map runs st.Fn over the items of in, yielding the results in the order of in. See the package
// documentation for the model; the fields of [Stage] for the options.
//
// Each range over the returned iterator runs the stage afresh: it ranges over in once, on a
// goroutine of its own, and its goroutines live until that range statement returns. An upstream
// that yields (zero, err) ends the iteration with err, after every earlier result; the value
// paired with an error is ignored.
//
// An early stop waits for a pull from in that is under way to return, since an iterator cannot
// be interrupted: an upstream that may block for long should watch ctx itself, as a Map does.
func Map[T, U any](ctx context.Context, in iter.Seq2[T, error], st Stage[T, U]) iter.Seq2[U, error] {
	if st.Fn == nil {
		panic("prefetch: Map: Stage.Fn is nil")
	}
	st = st.withDefaults()
	return func(yield func(U, error) bool) {
		if err := ctx.Err(); err != nil {
			// Nothing is started for a context that is already done, so nothing needs release.
			if st.Hooks.Wait != nil {
				st.Hooks.Wait(0)
			}
			var zero U
			yield(zero, err)
			return
		}
		p := start(ctx, in, st)
		// Deferred so that a panic in the consumer's loop body still stops and releases
		// everything before it propagates.
		defer p.stop()
		for {
			u, err, ok := p.next()
			if !ok {
				return
			}
			if !yield(u, err) || err != nil {
				return
			}
		}
	}
}

// withDefaults returns st with the documented defaults filled in.
func (st Stage[T, U]) withDefaults() Stage[T, U] {
	if st.Name == "" {
		st.Name = "stage"
	}
	if st.Concurrency < 1 {
		st.Concurrency = 1
	}
	if st.Ahead < 1 {
		st.Ahead = 2 * st.Concurrency
	}
	st.Ahead = max(st.Ahead, st.Concurrency)
	if st.MaxBytes < 1 || st.Size == nil {
		st.MaxBytes = 0
	}
	return st
}

// FromSeq turns a plain sequence into the input of a [Map], an iterator without errors. For a
// slice s, use FromSeq(slices.Values(s)).
func FromSeq[T any](s iter.Seq[T]) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for v := range s {
			if !yield(v, nil) {
				return
			}
		}
	}
}

// ItemError is the error Fn returned for one item, with the stage and the
// item's index; callers whose own errors already say where they happened
// can unwrap it.
type ItemError struct {
	Stage string
	Index int
	Err   error
}

func (e *ItemError) Error() string {
	return fmt.Sprintf("prefetch: %s item %d: %v", e.Stage, e.Index, e.Err)
}

// Unwrap returns the error Fn returned.
func (e *ItemError) Unwrap() error { return e.Err }

// PanicError is the error an iteration ends with when Fn (or Size) panics, or when the upstream
// iterator panics on the stage's goroutine. The panic is recovered so that it cannot crash the
// process from a goroutine the caller cannot reach.
type PanicError struct {
	Stage string // the Name of the stage
	Index int    // the index of the item whose Fn call panicked, or that was being pulled
	Input bool   // the upstream iterator panicked rather than Fn
	Value any    // the value passed to panic
	Stack []byte // the stack of the panicking goroutine, as from runtime/debug.Stack
}

// Error names the stage and the item and gives the panic's value; the stack is left to
// [PanicError.Stack] as it is too long for most logs.
func (e *PanicError) Error() string {
	if e.Input {
		return fmt.Sprintf("prefetch: %s input, pulling item %d: panic: %v", e.Stage, e.Index, e.Value)
	}
	return fmt.Sprintf("prefetch: %s item %d: panic: %v", e.Stage, e.Index, e.Value)
}

// Unwrap returns the panic's value if it is an error, such as a runtime.Error, so that errors.Is
// and errors.As see through the panic.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
