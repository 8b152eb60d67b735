package checkpoint

import (
	"context"
	"errors"
	"iter"
)

// A backend keeps bytes under string keys for a store. It knows nothing of
// runs, steps, ranks or states: everything that gives keys a meaning is the
// store's, so that every backend behaves alike. A backend is safe for
// concurrent use.
type backend interface {
	// get returns a copy of the value stored under key, or an error wrapping
	// errNoKey if there is none.
	get(ctx context.Context, key string) ([]byte, error)
	// put stores value under key, replacing any value it had. When it
	// returns, the value is as durable as the backend is configured to make
	// it; value may be reused by the caller.
	put(ctx context.Context, key string, value []byte) error
	// delete removes keys, in the order given; a key that is not there is
	// not an error. If it fails, some keys before the failing one may be gone
	// and none after it are, so a store that lists a marker first never
	// leaves a marker behind the states it vouched for.
	delete(ctx context.Context, keys []string) error
	// list yields the keys that begin with prefix, in ascending byte order.
	// With a non-empty delim, the keys that contain delim after prefix are
	// rolled up into one entry per distinct part up to and including the
	// first delim, as a bucket listing shows a directory, so a caller can
	// list what is directly under a prefix without paging through what is
	// below it. It yields a non-nil error once, last.
	list(ctx context.Context, prefix, delim string) iter.Seq2[string, error]
}

// errNoKey is what a backend's get wraps when the key has nothing stored.
var errNoKey = errors.New("no such key")

// A layout names the keys a store keeps its states and markers under. Each
// backend keeps the layout its stores have always had, so that states saved
// by an older sluice stay readable.
type layout interface {
	// runPrefix begins every key of run. No run's prefix begins another's.
	runPrefix(run string) string
	// stepPrefix begins every key of a step; it begins with runPrefix(run).
	stepPrefix(run string, step int64) string
	// rankKey is the key of one rank's state; it begins with stepPrefix.
	rankKey(run string, step int64, rank int) string
	// markerKey is the key of a step's completion marker, beginning with
	// stepPrefix, or "" in a layout without markers.
	markerKey(run string, step int64) string
	// delim is the separator after a step in a key, given to list so that
	// listing a run's steps does not list every rank of every step; "" where
	// keys have none.
	delim() string
	// parseStep returns the step of an entry that list (with delim) yields
	// under runPrefix(run), given what follows the prefix. It reports false
	// for keys the layout does not produce.
	parseStep(rest string) (int64, bool)
	// parseRank returns the rank of an entry that list (with delim) yields
	// under stepPrefix, given what follows the prefix. It reports false for
	// the marker and for keys the layout does not produce.
	parseRank(rest string) (int, bool)
}
