// Package engine is sluice's run-time engine: it streams a planned dataset
// from a position, as package stream's Batches, Map, Take and Mix deliver
// it. Package stream opens, validates and holds the user's API; it reaches
// the engine through New (the planned fragments, the plan, the options)
// and, for a mix, through Mix, and holds none of its fields.
//
// An iteration (Run) is a pipeline of named stages. fetch, decode and
// transform are each a bounded, ordered prefetch.Map with goroutines of its
// own, named as the metrics name them (package metrics); reads and cut walk
// the schedule in order, each feeding the stage after it, and deliver runs
// on the consumer's goroutine:
//
//	reads -> fetch -> decode (permute) -> cut -> transform -> deliver
//
// The stages:
//
//   - reads (run.go) walks the rank's schedule and says which window is
//     read next, in the order the batches first need them: with its fetch
//     planned against the windows after it (Fetches, fetch.go), or kept
//     decoded from an earlier iteration.
//   - fetch (run.go, read.go) is I/O: it brings a window's stored bytes into
//     memory, many windows in flight, neighbouring pieces of a file in one
//     request shared by the windows that need them.
//   - decode (run.go, read.go) is CPU: it turns the bytes into Arrow record
//     batches, one goroutine per core; permute (read.go, gather.go) then
//     puts a shuffled window's rows in their order once, column by column
//     (the columns on several goroutines where cores are idle, and for the
//     window the cut stage waits for, which prefetch.Waited tells and the
//     drivers hear of through formats.WithWaited), in the order drawn
//     while the window decoded.
//     A shuffled window is decoded into recycled buffers (recycle.go):
//     permute copies its rows out, so nothing else ever sees them.
//   - cut (cut.go) walks the schedule again on one goroutine and pairs each
//     batch with the windows it is cut from, keeping every window until the
//     consumer finishes it (window.go), so that an iteration stopped early
//     leaves them to the next.
//   - transform (run.go, build.go, gather.go) builds each batch (a slice, a
//     concatenation or a gather) and applies the caller's function.
//   - deliver (run.go) hands the results to the consumer in order; taking
//     a batch is what moves the position.
//
// What else it owns: the position and the states taken of it and loaded
// into it (engine.go, state.go), the bad rows counted per split
// (skipped.go), the bytes split boundaries fetch twice (overlap.go), the
// engines of Dataset.Consumers (split.go), random access by position
// (take.go), the counting pass EqualBatches needs (count.go), and a mix's
// lanes and chunks (lane.go, mix.go, mixgather.go).
//
// It decides no order: which row comes when is package permutation's and
// package split's, which it calls. It imports permutation, split, formats
// (the drivers' fetch and decode), prefetch, metrics and checkpoint (the
// state's encoding), and never stream, stream/internal/planner,
// storage back ends, cmd, bench or examples.
package engine
