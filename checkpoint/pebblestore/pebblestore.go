// Package pebblestore keeps checkpoints in a pebble database in a local
// directory: the embedded default checkpoint.Store, for jobs whose ranks share
// a machine (or a file system with working POSIX locks).
//
// It is a package of its own so that a program that keeps its checkpoints in
// a bucket, or keeps none, links neither pebble nor what pebble links
// (Prometheus' client among it). The store's behaviour is checkpoint's:
// this package supplies the bytes (a checkpoint.Backend over pebble) and the
// key names (a checkpoint.Layout), and checkpoint.NewStore does the rest.
package pebblestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicedata/sluice/checkpoint"
)

// ErrInUse is wrapped when a store directory is held by another process or
// by another open store in this process.
var ErrInUse = errors.New("pebblestore: store directory in use")

// Options configures Open. The zero value is the default for every field
// and suits checkpoints, which are small and written rarely.
type Options struct {
	// Logger receives pebble's own messages (flushes, compactions, WAL
	// recycling, background errors) at Info and Error level, and a warning
	// when a write or sync to the directory takes more than 5 seconds.
	//
	// The default, nil, drops them: they say nothing a training loop can act
	// on. Set it when investigating the store itself.
	Logger *slog.Logger

	// CacheSize is the size in bytes of pebble's block cache, which keeps
	// recently read blocks of the database's files uncompressed in memory.
	//
	// The default, 0, means 1 MiB. Checkpoints are read at resume and by
	// Latest and List; a larger cache only helps a database that also holds
	// large KV namespaces read often.
	CacheSize int64

	// MemTableSize is the size in bytes of a memtable, the in-memory buffer
	// of recent writes that is flushed to a file when full. Up to two may be
	// held at once.
	//
	// The default, 0, means 1 MiB, room for hundreds of states. Larger values
	// trade memory for fewer flushes when states are large.
	MemTableSize uint64

	// NoSync makes Save, Delete, Retain and KV writes return once pebble's
	// write-ahead log has been written to the operating system, without
	// waiting for it to reach the disk.
	//
	// The default, false, waits for the fsync, so a state Save returned for
	// survives a crash of the machine. With true, a crash of the process
	// loses nothing, but a power loss may lose the latest writes; it is meant
	// for tests and benchmarks, not for training runs.
	NoSync bool

	// ErrorIfNotExists makes Open fail, with an error wrapping
	// ErrNotFound, when the directory holds no store yet.
	//
	// The default, false, creates the directory (and its parents) and an
	// empty store in it. Set it where a missing store means a mistyped path,
	// such as a resume that must find its checkpoints.
	ErrorIfNotExists bool

	// ReadOnly opens the store without the ability to write: Save, Delete,
	// Retain and KV writes fail. The directory is still locked, so a store
	// cannot be read while a job has it open for writing.
	//
	// The default, false, opens it for reading and writing.
	ReadOnly bool
}

const (
	defaultCacheSize    = 1 << 20
	defaultMemTableSize = 1 << 20
	// diskSlowThreshold is how long a write or sync may take before the
	// Logger hears that the disk is slow (pebble's own default).
	diskSlowThreshold = 5 * time.Second
)

// Store is a checkpoint.Store in a pebble database in a local directory.
// Only one process opens a directory at a time; the others get an error
// wrapping ErrInUse. Its methods are checkpoint.BackendStore's, KV among
// them: a key-value space beside the checkpoints, such as store.KV("plans")
// for stream.Options.PlanCache, that lives and moves with them. All methods
// are safe for concurrent use.
//
// Key layout. Every key starts with a one-byte owner tag and a NUL:
//
//	"c\x00" run "\x00" step rank    a checkpoint: step is 8 bytes and rank 4,
//	                                both big-endian, so keys sort by run,
//	                                then step numerically, then rank
//	"n\x00" name "\x00" key         key of the KV namespace name
//
// Neither run nor namespace names contain NUL, so one run's keys never
// interleave with another's whose name it prefixes. Other owner tags are
// reserved for later use by sluice. A step has no completion marker: one
// process holds the directory, so a step is complete once its states are.
//
// The layout is the one checkpoint.OpenPebble wrote before this package was
// split out of checkpoint, so its directories open here unchanged.
type Store struct {
	*checkpoint.BackendStore
	dir     string
	backend *backend // under BackendStore, for tests that damage bytes
}

var _ checkpoint.Store = (*Store)(nil)

// Open opens (by default creating) the store in directory dir. The
// directory is locked until Close; a directory already held by another
// process or by another open store in this process gives an error wrapping
// ErrInUse that names it.
func Open(dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, errors.New("pebblestore: store directory is empty")
	}
	if opts.ErrorIfNotExists || opts.ReadOnly {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("pebblestore: store directory %q does not exist: %w", dir, notFound)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pebblestore: create store directory: %w", err)
	}
	// The lock is taken here rather than inside pebble.Open so that failing
	// to get it is told apart from other failures to open and reported as
	// what it nearly always is: a second job or a stale process on the same
	// directory.
	lock, err := pebble.LockDirectory(dir, vfs.Default)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			// Creating the LOCK file failed (permissions, read-only fs),
			// which is not contention.
			return nil, fmt.Errorf("pebblestore: lock store directory %q: %w", dir, err)
		}
		return nil, fmt.Errorf("%w: %q is held by another process or another open store (%v)", ErrInUse, dir, err)
	}
	// pebble wraps its file system in a disk-health checker whose goroutine
	// it stops on Close but not when Open fails; owning the wrapper lets a
	// failed open end it too.
	fsys, fsCloser := vfs.WithDiskHealthChecks(vfs.Default, diskSlowThreshold, nil, func(info vfs.DiskSlowInfo) {
		if opts.Logger != nil {
			opts.Logger.Warn("checkpoint store disk is slow", "dir", dir, "op", info.String())
		}
	})
	po := &pebble.Options{
		FS:               fsys,
		Lock:             lock,
		Logger:           pebbleLogger{opts.Logger},
		CacheSize:        orDefault(opts.CacheSize, defaultCacheSize),
		MemTableSize:     orDefault(opts.MemTableSize, defaultMemTableSize),
		ErrorIfNotExists: opts.ErrorIfNotExists,
		ReadOnly:         opts.ReadOnly,
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		lockErr := errors.Join(lock.Close(), fsCloser.Close())
		if errors.Is(err, pebble.ErrDBDoesNotExist) {
			err = notFound
		}
		return nil, errors.Join(fmt.Errorf("pebblestore: open store directory %q: %w", dir, err), lockErr)
	}
	wo := pebble.Sync
	if opts.NoSync {
		wo = pebble.NoSync
	}
	b := &backend{db: db, wo: wo, lock: lock, fsCloser: fsCloser}
	return &Store{
		BackendStore: checkpoint.NewStore(b, layout{}, fmt.Sprintf("store %q", dir)),
		dir:          dir,
		backend:      b,
	}, nil
}

func orDefault[T int64 | uint64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Dir returns the directory the store was opened in.
func (s *Store) Dir() string { return s.dir }

const (
	tagCheckpoint = 'c'
	tagNamespace  = 'n'
)

// layout is the key layout of a Store (see Store). Run and namespace names
// hold no NUL (see checkpoint.Layout), so the NUL that ends one keeps it
// apart from every name it prefixes.
type layout struct{}

func (layout) RunPrefix(run string) string {
	return string([]byte{tagCheckpoint, 0}) + run + "\x00"
}

func (l layout) StepPrefix(run string, step int64) string {
	return string(binary.BigEndian.AppendUint64([]byte(l.RunPrefix(run)), uint64(step)))
}

func (l layout) RankKey(run string, step int64, rank int) string {
	return string(binary.BigEndian.AppendUint32([]byte(l.StepPrefix(run, step)), uint32(rank)))
}

// MarkerKey is "": one process holds the directory, so a step is complete
// once its states are.
func (layout) MarkerKey(string, int64) string { return "" }

func (layout) Delim() string { return "" }

func (layout) NamespacePrefix(name string) string {
	return string([]byte{tagNamespace, 0}) + name + "\x00"
}

func (layout) ParseStep(rest string) (int64, bool) {
	if len(rest) != 12 {
		return 0, false
	}
	step := int64(binary.BigEndian.Uint64([]byte(rest[:8])))
	return step, step >= 0
}

func (layout) ParseRank(rest string) (int, bool) {
	if len(rest) != 4 {
		return 0, false
	}
	rank := binary.BigEndian.Uint32([]byte(rest))
	return int(rank), rank <= math.MaxInt32
}

// backend keeps a store's keys in a pebble database.
type backend struct {
	db       *pebble.DB
	wo       *pebble.WriteOptions
	lock     *pebble.Lock
	fsCloser io.Closer
}

func (p *backend) Get(_ context.Context, key string) ([]byte, error) {
	v, closer, err := p.db.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, checkpoint.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return slices.Clone(v), nil
}

func (p *backend) Put(_ context.Context, key string, value []byte) error {
	return p.db.Set([]byte(key), value, p.wo)
}

// Delete removes the keys in one batch, so they go all at once or not at
// all, with one sync however many there are.
func (p *backend) Delete(_ context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	b := p.db.NewBatch()
	defer b.Close()
	for _, k := range keys {
		if err := b.Delete([]byte(k), nil); err != nil {
			return err
		}
	}
	return b.Commit(p.wo)
}

// List rolls up keys under a delimiter by seeking past each rolled-up part,
// so it costs one seek per part rather than one step per key.
func (p *backend) List(ctx context.Context, prefix, delim string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		var lower []byte // pebble's invariant checks (on under -race) refuse an empty, non-nil bound
		if prefix != "" {
			lower = []byte(prefix)
		}
		it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
		if err != nil {
			yield("", err)
			return
		}
		closed := false
		defer func() {
			if !closed {
				it.Close()
			}
		}()
		for valid := it.First(); valid; {
			if err := ctx.Err(); err != nil {
				yield("", err)
				return
			}
			key := string(it.Key())
			i := -1
			if delim != "" {
				i = strings.Index(key[len(prefix):], delim)
			}
			if i < 0 {
				if !yield(key, nil) {
					return
				}
				valid = it.Next()
				continue
			}
			part := key[:len(prefix)+i+len(delim)]
			if !yield(part, nil) {
				return
			}
			end := prefixEnd([]byte(part))
			if end == nil {
				break
			}
			valid = it.SeekGE(end)
		}
		closed = true
		if err := it.Close(); err != nil {
			yield("", err)
		}
	}
}

// Close closes the database, then releases the directory: the lock
// outlives the database, as pebble requires it to be released only after
// the database using it is closed.
func (p *backend) Close() error {
	return errors.Join(p.db.Close(), p.lock.Close(), p.fsCloser.Close())
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := slices.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}

// pebbleLogger hands pebble's messages to a slog.Logger, or drops them.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	if p.l != nil {
		p.l.Info(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	if p.l != nil {
		p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

// Fatalf must not return: pebble calls it when continuing would damage the
// database. Panicking (rather than exiting, as pebble's default logger does)
// leaves the choice to the program.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if p.l != nil {
		p.l.Error(msg, "component", "pebble", "fatal", true)
	}
	panic("pebblestore: pebble: " + msg)
}

// notFound is checkpoint.ErrNotFound for wrapping in this package's errors,
// without its "checkpoint: " prefix in the middle of their text.
var notFound error = &trimmed{checkpoint.ErrNotFound}

type trimmed struct{ err error }

func (t *trimmed) Error() string { return strings.TrimPrefix(t.err.Error(), "checkpoint: ") }
func (t *trimmed) Unwrap() error { return t.err }
