package checkpoint

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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
)

// PebbleOptions configures OpenPebble. The zero value is the default for
// every field and suits checkpoints, which are small and written rarely.
type PebbleOptions struct {
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

	// ErrorIfNotExists makes OpenPebble fail, with an error wrapping
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

// PebbleStore is the default Store: a pebble database in a local directory,
// for jobs whose ranks share a machine (or a file system with working POSIX
// locks). Only one process opens a directory at a time; the others get an
// error wrapping ErrInUse. All methods are safe for concurrent use.
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
type PebbleStore struct {
	store
	dir string
}

var _ Store = (*PebbleStore)(nil)

// OpenPebble opens (by default creating) the store in directory dir. The
// directory is locked until Close; a directory already held by another
// process or by another open store in this process gives an error wrapping
// ErrInUse that names it.
func OpenPebble(dir string, opts PebbleOptions) (*PebbleStore, error) {
	if dir == "" {
		return nil, errors.New("checkpoint: store directory is empty")
	}
	if opts.ErrorIfNotExists || opts.ReadOnly {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("checkpoint: store directory %q does not exist: %w", dir, trimPrefix(ErrNotFound))
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint: create store directory: %w", err)
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
			return nil, fmt.Errorf("checkpoint: lock store directory %q: %w", dir, err)
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
			err = trimPrefix(ErrNotFound)
		}
		return nil, errors.Join(fmt.Errorf("checkpoint: open store directory %q: %w", dir, err), lockErr)
	}
	wo := pebble.Sync
	if opts.NoSync {
		wo = pebble.NoSync
	}
	return &PebbleStore{
		store: store{
			b:    &pebbleBackend{db: db, wo: wo},
			keys: pebbleLayout{},
			name: fmt.Sprintf("store %q", dir),
			// The lock outlives the database: pebble requires it to be
			// released only after the database using it is closed.
			release: func() error { return errors.Join(db.Close(), lock.Close(), fsCloser.Close()) },
		},
		dir: dir,
	}, nil
}

func orDefault[T int64 | uint64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Dir returns the directory the store was opened in.
func (s *PebbleStore) Dir() string { return s.dir }

// KV is a small key-value space for other sluice data that should live and
// move with the checkpoints (a plan cache, say). Keys and values are opaque
// bytes; a missing key gives an error wrapping ErrNotFound.
type KV interface {
	// Get returns a copy of the value of key.
	Get(ctx context.Context, key []byte) ([]byte, error)
	// Set stores value under key, replacing any value it had.
	Set(ctx context.Context, key, value []byte) error
	// Delete removes key; removing a missing key is not an error.
	Delete(ctx context.Context, key []byte) error
}

// KV returns the key-value space called namespace in the store's database,
// apart from the checkpoints and from every other namespace. Namespace names
// follow the rules of run names. Writes are synced unless
// PebbleOptions.NoSync. The KV is usable until the store is closed.
func (s *PebbleStore) KV(namespace string) (KV, error) {
	if err := checkRun(namespace); err != nil {
		return nil, fmt.Errorf("checkpoint: namespace: %w", trimPrefix(err))
	}
	return &kvSpace{s: &s.store, name: namespace, prefix: string([]byte{tagNamespace, 0}) + namespace + "\x00"}, nil
}

const (
	tagCheckpoint = 'c'
	tagNamespace  = 'n'
)

// pebbleLayout is the key layout of a PebbleStore's checkpoints (see
// PebbleStore).
type pebbleLayout struct{}

func (pebbleLayout) runPrefix(run string) string {
	return string([]byte{tagCheckpoint, 0}) + run + "\x00"
}

func (l pebbleLayout) stepPrefix(run string, step int64) string {
	return string(binary.BigEndian.AppendUint64([]byte(l.runPrefix(run)), uint64(step)))
}

func (l pebbleLayout) rankKey(run string, step int64, rank int) string {
	return string(binary.BigEndian.AppendUint32([]byte(l.stepPrefix(run, step)), uint32(rank)))
}

func (pebbleLayout) markerKey(string, int64) string { return "" }

func (pebbleLayout) delim() string { return "" }

func (pebbleLayout) parseStep(rest string) (int64, bool) {
	if len(rest) != 12 {
		return 0, false
	}
	step := int64(binary.BigEndian.Uint64([]byte(rest[:8])))
	return step, step >= 0
}

func (pebbleLayout) parseRank(rest string) (int, bool) {
	if len(rest) != 4 {
		return 0, false
	}
	rank := binary.BigEndian.Uint32([]byte(rest))
	return int(rank), rank <= math.MaxInt32
}

// pebbleBackend keeps a store's keys in a pebble database.
type pebbleBackend struct {
	db *pebble.DB
	wo *pebble.WriteOptions
}

func (p *pebbleBackend) get(_ context.Context, key string) ([]byte, error) {
	v, closer, err := p.db.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, errNoKey
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return slices.Clone(v), nil
}

func (p *pebbleBackend) put(_ context.Context, key string, value []byte) error {
	return p.db.Set([]byte(key), value, p.wo)
}

// delete removes the keys in one batch, so they go all at once or not at
// all, with one sync however many there are.
func (p *pebbleBackend) delete(_ context.Context, keys []string) error {
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

// list rolls up keys under a delimiter by seeking past each rolled-up part,
// so it costs one seek per part rather than one step per key.
func (p *pebbleBackend) list(ctx context.Context, prefix, delim string) iter.Seq2[string, error] {
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
	panic("checkpoint: pebble: " + msg)
}
