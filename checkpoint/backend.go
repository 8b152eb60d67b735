package checkpoint

import (
	"context"
	"iter"
)

// A Backend keeps bytes under string keys for a store made by NewStore. It
// knows nothing of runs, steps, ranks or states: everything that gives keys
// a meaning is the store's and its Layout's, so that every backend behaves
// alike. The bucket store is one; package pebblestore holds another.
//
// This is a contract: the store's guarantees (a step is complete only once
// every rank is stored, a failed Delete or Retain never leaves a step looking
// complete with ranks missing, Latest falls back past damage) hold only if
// every method does what it says here. A Backend is safe for concurrent use.
type Backend interface {
	// Get returns a copy of the value stored under key, or an error wrapping
	// ErrNotFound if there is none. Any other error is a failure to read,
	// which the store reports rather than treating the key as absent.
	Get(ctx context.Context, key string) ([]byte, error)

	// Put stores value under key, replacing any value it had. When it
	// returns, the value is as durable as the backend is configured to make
	// it and is seen by Get and List, also from other processes sharing the
	// backend; value may be reused by the caller.
	Put(ctx context.Context, key string, value []byte) error

	// Delete removes keys, in the order given; a key that is not there is
	// not an error. If it fails, some keys before the failing one may be gone
	// but none after it are, so a store that lists a step's marker first
	// never leaves a marker behind the states it vouched for.
	Delete(ctx context.Context, keys []string) error

	// List yields the keys that begin with prefix, in ascending byte order.
	// With a non-empty delim, the keys that contain delim after prefix are
	// rolled up into one entry per distinct part up to and including the
	// first delim, as a bucket listing shows a directory, so a caller can
	// list what is directly under a prefix without paging through what is
	// below it. It stops with ctx's error once ctx is done, and yields a
	// non-nil error at most once, last. A caller may stop early; what the
	// listing held is released then.
	List(ctx context.Context, prefix, delim string) iter.Seq2[string, error]

	// Close releases what the backend holds. The store calls it once, from
	// its own Close, after every call in flight has returned; no method is
	// called after it.
	Close() error
}

// A Layout names the keys a store keeps its states and markers under in its
// Backend. It is pure: no I/O, and the same answers every time. Each store
// keeps the layout it has always had, so that states saved by an older
// sluice stay readable.
//
// Run names and namespace names are never empty, at most MaxRunName bytes of
// valid UTF-8, and hold no '/', '\\' or control character (NUL included), and
// are not "." or "..": a layout may use such characters to end a name.
type Layout interface {
	// RunPrefix begins every key of run. No run's prefix begins another's.
	RunPrefix(run string) string
	// StepPrefix begins every key of a step; it begins with RunPrefix(run)
	// and no step's prefix begins another's.
	StepPrefix(run string, step int64) string
	// RankKey is the key of one rank's state; it begins with StepPrefix.
	RankKey(run string, step int64, rank int) string
	// MarkerKey is the key of a step's completion marker, beginning with
	// StepPrefix, or "" in a layout without markers. A marker holds the
	// step's world size in decimal and is written by the saver that finds
	// every rank present, so a layout for a backend shared by processes
	// that save ranks of one step at once needs one: without it a step is
	// complete as soon as its states are, which holds only where one process
	// writes them.
	MarkerKey(run string, step int64) string
	// Delim is the separator after a step in a key, given to List so that
	// listing a run's steps does not list every rank of every step; "" where
	// keys have none.
	Delim() string
	// ParseStep returns the step of an entry that List (with Delim) yields
	// under RunPrefix(run), given what follows the prefix. It reports false
	// for keys the layout does not produce, which the store ignores.
	ParseStep(rest string) (int64, bool)
	// ParseRank returns the rank of an entry that List (with Delim) yields
	// under StepPrefix, given what follows the prefix. It reports false for
	// the marker and for keys the layout does not produce.
	ParseRank(rest string) (int, bool)
	// NamespacePrefix begins every key of the KV namespace called name, or
	// is "" in a layout without namespaces. No checkpoint key and no other
	// namespace's key begins with it.
	NamespacePrefix(name string) string
}
