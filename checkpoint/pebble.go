package checkpoint

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sync"
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
// reserved for later use by sluice.
type PebbleStore struct {
	dir      string
	db       *pebble.DB
	lock     *pebble.Lock
	fsCloser io.Closer // stops the disk-health checker; after db.Close
	wo       *pebble.WriteOptions

	// mu is held for reading by every operation and for writing by Close,
	// so Close waits for operations in flight and none starts afterwards.
	mu     sync.RWMutex
	closed bool
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
	return &PebbleStore{dir: dir, db: db, lock: lock, fsCloser: fsCloser, wo: wo}, nil
}

func orDefault[T int64 | uint64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Dir returns the directory the store was opened in.
func (s *PebbleStore) Dir() string { return s.dir }

// Close closes the database and releases the directory lock. It waits for
// operations in flight. Closing twice is not an error.
func (s *PebbleStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	// The lock outlives the database: pebble requires it to be released
	// only after the database using it is closed.
	err := errors.Join(s.db.Close(), s.lock.Close(), s.fsCloser.Close())
	if err != nil {
		return fmt.Errorf("checkpoint: close store %q: %w", s.dir, err)
	}
	return nil
}

// enter starts an operation: it fails once the store is closed or the
// context is done. On success the caller must call s.mu.RUnlock.
func (s *PebbleStore) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return fmt.Errorf("%w: %q", ErrClosed, s.dir)
	}
	return nil
}

const (
	tagCheckpoint = 'c'
	tagNamespace  = 'n'
)

func runPrefix(run string) []byte {
	k := make([]byte, 0, 3+len(run)+12)
	k = append(k, tagCheckpoint, 0)
	k = append(k, run...)
	return append(k, 0)
}

func stepPrefix(run string, step int64) []byte {
	return binary.BigEndian.AppendUint64(runPrefix(run), uint64(step))
}

func rankKey(run string, step int64, rank int) []byte {
	return binary.BigEndian.AppendUint32(stepPrefix(run, step), uint32(rank))
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

// Save implements Store. The write is synced unless PebbleOptions.NoSync.
func (s *PebbleStore) Save(ctx context.Context, run string, step int64, rank int, st State) error {
	if err := checkSave(run, step, rank, &st); err != nil {
		return err
	}
	b, err := Encode(st)
	if err != nil {
		return fmt.Errorf("checkpoint: save run %q step %d rank %d: %w", run, step, rank, trimPrefix(err))
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	if err := s.db.Set(rankKey(run, step, rank), b, s.wo); err != nil {
		return fmt.Errorf("checkpoint: save run %q step %d rank %d in %q: %w", run, step, rank, s.dir, err)
	}
	return nil
}

// Load implements Store.
func (s *PebbleStore) Load(ctx context.Context, run string, step int64, rank int) (State, error) {
	if err := checkRank(run, step, rank); err != nil {
		return State{}, err
	}
	if err := s.enter(ctx); err != nil {
		return State{}, err
	}
	defer s.mu.RUnlock()
	b, err := s.get(rankKey(run, step, rank))
	if errors.Is(err, pebble.ErrNotFound) {
		return State{}, fmt.Errorf("checkpoint: run %q step %d rank %d: %w", run, step, rank, trimPrefix(ErrNotFound))
	}
	return decodeStored(run, step, storedRank{rank: rank, data: b, err: err})
}

func (s *PebbleStore) get(key []byte) ([]byte, error) {
	v, closer, err := s.db.Get(key)
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return slices.Clone(v), nil
}

// LoadStep implements Store.
func (s *PebbleStore) LoadStep(ctx context.Context, run string, step int64) (State, error) {
	if err := checkStep(run, step); err != nil {
		return State{}, err
	}
	if err := s.enter(ctx); err != nil {
		return State{}, err
	}
	defer s.mu.RUnlock()
	var stored []storedRank
	err := s.scan(ctx, run, step, false, func(_ int64, ranks []storedRank) bool {
		stored = ranks
		return false
	})
	if err != nil {
		return State{}, err
	}
	_, merged, err := assessStep(run, step, stored, noMarker)
	return merged, err
}

// Latest implements Store. It reads steps from the newest back and stops at
// the first complete one, so its cost does not grow with the run's history.
func (s *PebbleStore) Latest(ctx context.Context, run string) (int64, error) {
	if err := checkRun(run); err != nil {
		return 0, err
	}
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.mu.RUnlock()
	found := int64(-1)
	var stepErr error
	err := s.scan(ctx, run, -1, true, func(step int64, ranks []storedRank) bool {
		info, _, err := assessStep(run, step, ranks, noMarker)
		if info.Complete {
			found = step
			return false
		}
		if !skippable(err) {
			stepErr = err
			return false
		}
		return true
	})
	if err != nil {
		return 0, err
	}
	if stepErr != nil {
		return 0, stepErr
	}
	if found < 0 {
		return 0, fmt.Errorf("checkpoint: run %q has no complete step: %w", run, trimPrefix(ErrNotFound))
	}
	return found, nil
}

// List implements Store.
func (s *PebbleStore) List(ctx context.Context, run string) ([]StepInfo, error) {
	if err := checkRun(run); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	return s.list(ctx, run)
}

func (s *PebbleStore) list(ctx context.Context, run string) ([]StepInfo, error) {
	var infos []StepInfo
	err := s.scan(ctx, run, -1, false, func(step int64, ranks []storedRank) bool {
		info, _, _ := assessStep(run, step, ranks, noMarker)
		infos = append(infos, info)
		return true
	})
	return infos, err
}

// Delete implements Store.
func (s *PebbleStore) Delete(ctx context.Context, run string, step int64) error {
	if err := checkStep(run, step); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	p := stepPrefix(run, step)
	if err := s.db.DeleteRange(p, prefixEnd(p), s.wo); err != nil {
		return fmt.Errorf("checkpoint: delete run %q step %d in %q: %w", run, step, s.dir, err)
	}
	return nil
}

// Retain implements Store. The older steps go in one range deletion, so
// Retain costs the same however many steps it removes.
func (s *PebbleStore) Retain(ctx context.Context, run string, keep int) error {
	if err := checkKeep(run, keep); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	infos, err := s.list(ctx, run)
	if err != nil {
		return err
	}
	oldest, ok := pickRetained(infos, keep)
	if !ok || oldest == infos[0].Step {
		return nil
	}
	if err := s.db.DeleteRange(runPrefix(run), stepPrefix(run, oldest), s.wo); err != nil {
		return fmt.Errorf("checkpoint: retain run %q: delete steps before %d in %q: %w", run, oldest, s.dir, err)
	}
	return nil
}

// scan calls fn with the stored ranks of each step of run, ascending (or
// descending if reverse), until fn returns false. With only >= 0 it visits
// that step alone.
func (s *PebbleStore) scan(ctx context.Context, run string, only int64, reverse bool, fn func(step int64, ranks []storedRank) bool) (err error) {
	lower := runPrefix(run)
	if only >= 0 {
		lower = stepPrefix(run, only)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return fmt.Errorf("checkpoint: read run %q in %q: %w", run, s.dir, err)
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("checkpoint: read run %q in %q: %w", run, s.dir, cerr)
		}
	}()
	prefixLen := len(runPrefix(run))
	var (
		cur   int64 = -1
		ranks []storedRank
	)
	flush := func() bool {
		if cur < 0 {
			return true
		}
		if reverse {
			slices.Reverse(ranks)
		}
		more := fn(cur, ranks)
		ranks = nil
		return more
	}
	valid := it.First()
	if reverse {
		valid = it.Last()
	}
	for ; valid; valid = step(it, reverse) {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := it.Key()
		if len(k) != prefixLen+12 {
			return fmt.Errorf("checkpoint: run %q in %q: %w", run, s.dir, corrupt("key %x has a bad length", k))
		}
		stepNo := int64(binary.BigEndian.Uint64(k[prefixLen:]))
		rank := int(binary.BigEndian.Uint32(k[prefixLen+8:]))
		if stepNo != cur {
			if !flush() {
				return nil
			}
			cur = stepNo
		}
		v, verr := it.ValueAndErr()
		ranks = append(ranks, storedRank{rank: rank, data: slices.Clone(v), err: verr})
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("checkpoint: read run %q in %q: %w", run, s.dir, err)
	}
	flush()
	return nil
}

func step(it *pebble.Iterator, reverse bool) bool {
	if reverse {
		return it.Prev()
	}
	return it.Next()
}

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
	p := make([]byte, 0, 3+len(namespace))
	p = append(p, tagNamespace, 0)
	p = append(p, namespace...)
	return &pebbleKV{s: s, name: namespace, prefix: append(p, 0)}, nil
}

type pebbleKV struct {
	s      *PebbleStore
	name   string
	prefix []byte
}

func (kv *pebbleKV) key(k []byte) []byte {
	return append(slices.Clip(kv.prefix), k...)
}

func (kv *pebbleKV) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := kv.s.enter(ctx); err != nil {
		return nil, err
	}
	defer kv.s.mu.RUnlock()
	v, err := kv.s.get(kv.key(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("checkpoint: namespace %q key %q: %w", kv.name, key, trimPrefix(ErrNotFound))
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: namespace %q key %q: %w", kv.name, key, err)
	}
	return v, nil
}

func (kv *pebbleKV) Set(ctx context.Context, key, value []byte) error {
	if err := kv.s.enter(ctx); err != nil {
		return err
	}
	defer kv.s.mu.RUnlock()
	if err := kv.s.db.Set(kv.key(key), value, kv.s.wo); err != nil {
		return fmt.Errorf("checkpoint: namespace %q key %q: %w", kv.name, key, err)
	}
	return nil
}

func (kv *pebbleKV) Delete(ctx context.Context, key []byte) error {
	if err := kv.s.enter(ctx); err != nil {
		return err
	}
	defer kv.s.mu.RUnlock()
	if err := kv.s.db.Delete(kv.key(key), kv.s.wo); err != nil {
		return fmt.Errorf("checkpoint: namespace %q key %q: %w", kv.name, key, err)
	}
	return nil
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
