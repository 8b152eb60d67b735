// Package localcache keeps the bytes read from object stores on local disk,
// so that a second epoch, and every other process of the job on the same
// machine, reads them from there instead of from the bucket.
//
// An object is cached in blocks (Options.BlockBytes) at fixed offsets, each
// a file under Options.Dir named by the hash of what it holds: the bucket,
// the key, the object's version as planned (storage.Object.Version, and its
// size and modification time where the version does not say it all) and
// the block's place. A version rewritten is another name, so the cache
// never serves the bytes of a version other than the one a read is pinned
// to. A file carries a CRC-32C of each of its pages, checked on every read
// of them; a file that fails is removed and its block fetched again.
//
// Processes share a folder safely: a block is fetched by the process that
// holds its lock (flock on one of a fixed set of lock files), the others
// wait for it and read the file it writes; a file is written under another
// name, synced and renamed into place, so that a process killed while
// writing leaves a temporary file that no reader opens. Least recently
// read blocks are removed when the folder holds more than Options.MaxBytes.
package localcache

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedata/sluice/storage"
)

// Options configure a Cache. Dir is required; every other field's zero
// value is its documented default.
type Options struct {
	// Dir is the folder the cache keeps its files in, created if missing.
	// Every process that opens the same folder shares what it holds.
	Dir string
	// MaxBytes bounds the bytes of the blocks kept: when they exceed it,
	// the least recently read are removed until they are 90% of it. Each
	// process tallies what it writes and counts the folder again when its
	// writes since the last count reach an eighth of the bound, so with N
	// processes writing at once the folder may hold up to N/8 of the bound
	// more, briefly. Default 10 GiB; at least 2 × BlockBytes.
	MaxBytes int64
	// BlockBytes is the size of the blocks objects are cached in: a read
	// that misses fetches the whole blocks it touches (the object's last
	// is shorter), in one request where they are adjacent. Larger blocks
	// mean fewer files and requests, and more bytes fetched that no read
	// asked for where a job reads parts of its files (some columns).
	// Default 4 MiB.
	BlockBytes int64
	// OnHit, if set, is told the bytes of every read served from the
	// cache; OnEvict the blocks removed to keep the bound, and their bytes.
	// Both must be safe for concurrent use.
	OnHit   func(bytes int)
	OnEvict func(blocks int, bytes int64)
}

const (
	defaultMaxBytes   = 10 << 30
	defaultBlockBytes = 4 << 20
	pageSize          = 64 << 10
	// lockStripes is how many lock files the blocks share: a fixed set,
	// so that removing a block never removes a lock another process holds
	// or is about to take.
	lockStripes = 4096
	// staleTemp is the age after which a temporary file is taken for the
	// leftover of a process killed while writing it, and removed.
	staleTemp = 10 * time.Minute
)

// Stats are what a Cache has done since Open.
type Stats struct {
	// HitBytes were served from the cache, FetchedBytes fetched from the
	// bucket (whole blocks) because the cache did not hold them.
	HitBytes, FetchedBytes int64
	// Evictions counts the blocks removed to keep the bound, EvictedBytes
	// their bytes.
	Evictions, EvictedBytes int64
}

// Cache is a folder of cached blocks. It is safe for concurrent use, and
// the folder for use by several processes at once.
type Cache struct {
	dir, blocks, locks, tmp string
	max, block              int64
	onHit                   func(int)
	onEvict                 func(int, int64)

	// used is what this process last counted in the folder plus what it
	// wrote since; sinceScan what it wrote since.
	used, sinceScan atomic.Int64
	scanning        atomic.Bool

	hitBytes, fetchedBytes, evictions, evictedBytes atomic.Int64

	mu sync.Mutex
	// inflight are the blocks a goroutine of this process is fetching or
	// waiting for another process to fetch: the others wait for it.
	inflight map[string]chan struct{}
}

// Open opens (creating it if missing) the cache folder o.Dir and counts
// what it holds, removing the least recently read blocks if that exceeds
// the bound.
func Open(o Options) (*Cache, error) {
	if o.Dir == "" {
		return nil, errors.New("localcache: Options.Dir is empty")
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = defaultMaxBytes
	}
	if o.BlockBytes == 0 {
		o.BlockBytes = defaultBlockBytes
	}
	switch {
	case o.BlockBytes < 0 || o.BlockBytes > maxBlockBytes:
		return nil, fmt.Errorf("localcache: BlockBytes %d is not between 1 and %d", o.BlockBytes, maxBlockBytes)
	case o.MaxBytes < 2*o.BlockBytes:
		return nil, fmt.Errorf("localcache: MaxBytes %d holds fewer than two blocks of %d bytes", o.MaxBytes, o.BlockBytes)
	}
	if err := lockingSupported(); err != nil {
		return nil, err
	}
	c := &Cache{
		dir: o.Dir, blocks: filepath.Join(o.Dir, "blocks"), locks: filepath.Join(o.Dir, "locks"), tmp: filepath.Join(o.Dir, "tmp"),
		max: o.MaxBytes, block: o.BlockBytes, onHit: o.OnHit, onEvict: o.OnEvict,
		inflight: map[string]chan struct{}{},
	}
	for _, d := range []string{c.blocks, c.locks, c.tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("localcache: %w", err)
		}
	}
	if err := c.scan(); err != nil {
		return nil, fmt.Errorf("localcache: count %s: %w", c.dir, err)
	}
	return c, nil
}

// Stats returns what the cache has done since Open.
func (c *Cache) Stats() Stats {
	return Stats{HitBytes: c.hitBytes.Load(), FetchedBytes: c.fetchedBytes.Load(), Evictions: c.evictions.Load(), EvictedBytes: c.evictedBytes.Load()}
}

// Wrap returns b with its range reads served through the cache. bucketURL
// names the bucket among every other the folder caches (scheme and host,
// without a query that may carry credentials that change).
func (c *Cache) Wrap(bucketURL string, b storage.Bucket) storage.Bucket {
	return &bucket{Bucket: b, c: c, url: bucketURL}
}

type bucket struct {
	storage.Bucket
	c   *Cache
	url string
}

// part is the piece of one block a read wants: block i, bytes [at,
// at+len(dst)) of it, into dst.
type part struct {
	i   int64
	at  int64
	dst []byte
	// id and path name the block's file; length is the block's size.
	id     [32]byte
	path   string
	length int
}

func (b *bucket) ReadAt(ctx context.Context, obj storage.Object, p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	if len(p) == 0 || off < 0 || end > obj.Size {
		// Past the end, the bucket says what it says about that.
		return b.Bucket.ReadAt(ctx, obj, p, off)
	}
	c := b.c
	var missing []*part
	hit := 0
	for i := off / c.block; i*c.block < end; i++ {
		lo, hi := max(off, i*c.block), min(end, (i+1)*c.block)
		pt := b.part(obj, i)
		pt.at, pt.dst = lo-i*c.block, p[lo-off:hi-off]
		if c.readBlock(pt) {
			hit += len(pt.dst)
		} else {
			missing = append(missing, pt)
		}
	}
	if err := b.fill(ctx, obj, missing); err != nil {
		return 0, err
	}
	c.hit(hit)
	return len(p), nil
}

// identity is what a block's name is the hash of: the bucket, the object
// as planned and the block's place. Where the store names versions, the
// version is the object's (ETag, generation); the modification time then
// stays out, as stores give it at another precision in a listing than in
// an answer. A local file's version, its inode, is kept with its time.
func (b *bucket) part(obj storage.Object, i int64) *part {
	h := sha256.New()
	var n [8]byte
	field := func(s string) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field(b.url)
	field(obj.Key)
	field(obj.Version)
	mod := ""
	if obj.Version == "" || b.Scheme() == "file" {
		mod = obj.ModTime.UTC().Format(time.RFC3339Nano)
	}
	field(mod)
	field(fmt.Sprint(obj.Size, "/", b.c.block, "/", i))
	pt := &part{i: i, length: int(min(b.c.block, obj.Size-i*b.c.block))}
	h.Sum(pt.id[:0])
	name := hex.EncodeToString(pt.id[:])
	pt.path = filepath.Join(b.c.blocks, name[:2], name)
	return pt
}

func (c *Cache) hit(n int) {
	if n > 0 {
		c.hitBytes.Add(int64(n))
		if c.onHit != nil {
			c.onHit(n)
		}
	}
}

// fill reads the missing parts: fetching the blocks no other goroutine or
// process is fetching (adjacent ones in one request) and keeping them, and
// reading the others' from the files those write once they have.
func (b *bucket) fill(ctx context.Context, obj storage.Object, missing []*part) error {
	c := b.c
	for len(missing) > 0 {
		var mine, others []*part
		var waits []chan struct{}
		c.mu.Lock()
		for _, pt := range missing {
			if ch, ok := c.inflight[pt.path]; ok {
				others, waits = append(others, pt), append(waits, ch)
				continue
			}
			c.inflight[pt.path] = make(chan struct{})
			mine = append(mine, pt)
		}
		c.mu.Unlock()
		err := b.fetchOwn(ctx, obj, mine)
		if err != nil {
			return err
		}
		// The blocks another goroutine was at: read once it is done, or
		// go round again where it failed (its error is its caller's).
		missing = missing[:0]
		for k, pt := range others {
			select {
			case <-waits[k]:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			if c.readBlock(pt) {
				c.hit(len(pt.dst))
			} else {
				missing = append(missing, pt)
			}
		}
	}
	return nil
}

// done ends this process's claim on a block.
func (c *Cache) done(pt *part) {
	c.mu.Lock()
	ch := c.inflight[pt.path]
	delete(c.inflight, pt.path)
	c.mu.Unlock()
	close(ch)
}

// fetchOwn fills the parts this process claimed: those whose lock it gets
// at once are fetched together, the rest one at a time once another
// process has released them (a block that process wrote is then read).
func (b *bucket) fetchOwn(ctx context.Context, obj storage.Object, mine []*part) error {
	c := b.c
	var unlocked []*part
	defer func() {
		for _, pt := range mine {
			c.done(pt)
		}
	}()
	var run []*part
	var runLocks []*os.File
	release := func() {
		for _, l := range runLocks {
			unlock(l)
		}
		run, runLocks = run[:0], runLocks[:0]
	}
	defer release()
	for _, pt := range mine {
		l, ok, err := c.tryLock(pt)
		if err != nil {
			return err
		}
		if !ok {
			unlocked = append(unlocked, pt)
			continue
		}
		if c.readBlock(pt) { // written by another process since the first look
			unlock(l)
			c.hit(len(pt.dst))
			continue
		}
		if len(run) > 0 && run[len(run)-1].i+1 != pt.i {
			if err := b.fetch(ctx, obj, run); err != nil {
				return err
			}
			release()
		}
		run, runLocks = append(run, pt), append(runLocks, l)
	}
	if len(run) > 0 {
		if err := b.fetch(ctx, obj, run); err != nil {
			return err
		}
		release()
	}
	for _, pt := range unlocked {
		l, err := c.lock(ctx, pt)
		if err != nil {
			return err
		}
		if c.readBlock(pt) {
			c.hit(len(pt.dst))
			unlock(l)
			continue
		}
		err = b.fetch(ctx, obj, []*part{pt})
		unlock(l)
		if err != nil {
			return err
		}
	}
	return nil
}

// fetch reads the adjacent blocks of run from the bucket in one request,
// copies the parts asked for and keeps the blocks. A block that cannot be
// kept (a full disk) is still delivered.
func (b *bucket) fetch(ctx context.Context, obj storage.Object, run []*part) error {
	c := b.c
	start := run[0].i * c.block
	n := 0
	for _, pt := range run {
		n += pt.length
	}
	buf := make([]byte, n)
	if _, err := b.Bucket.ReadAt(ctx, obj, buf, start); err != nil {
		return err
	}
	c.fetchedBytes.Add(int64(n))
	for _, pt := range run {
		data := buf[pt.i*c.block-start:][:pt.length]
		copy(pt.dst, data[pt.at:])
		c.write(pt, data)
	}
	return nil
}

// readBlock fills pt.dst from the block's file, checking the header and
// the pages it reads, and marks the block used. A file that fails a check
// is removed: the block is fetched again.
func (c *Cache) readBlock(pt *part) bool {
	f, err := os.Open(pt.path)
	if err != nil {
		return false
	}
	defer f.Close()
	ok := c.readOpen(f, pt)
	if !ok {
		os.Remove(pt.path)
		return false
	}
	now := time.Now()
	_ = os.Chtimes(pt.path, now, now) // the recency eviction goes by; a failure costs only that
	return true
}

var bufs = sync.Pool{New: func() any { return new([]byte) }}

func (c *Cache) readOpen(f *os.File, pt *part) bool {
	hs := headerSize(pt.length, pageSize)
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	if cap(*bp) < hs+pageSize {
		*bp = make([]byte, hs+pageSize)
	}
	head, scratch := (*bp)[:hs], (*bp)[hs:hs+pageSize]
	if _, err := f.ReadAt(head, 0); err != nil {
		return false
	}
	h, n, err := parseHeader(head)
	if err != nil || n != hs || h.id != pt.id || h.length != pt.length || h.pageSize != pageSize || h.offset != pt.i*c.block {
		return false
	}
	// The pages wholly inside [a, b) are read into dst and checked there,
	// so the bulk of a read is copied once; the pages it covers in part,
	// at either end, through scratch.
	a, b := int(pt.at), int(pt.at)+len(pt.dst)
	lo, hi := (a+pageSize-1)/pageSize*pageSize, b/pageSize*pageSize
	if b == pt.length {
		hi = b // the block's short last page, covered to its end
	}
	edge := func(p int) bool {
		ps, pe := p*pageSize, min((p+1)*pageSize, pt.length)
		page := scratch[:pe-ps]
		if _, err := f.ReadAt(page, int64(hs+ps)); err != nil || h.checkPages(p, page) != nil {
			return false
		}
		from, to := max(ps, a), min(pe, b)
		copy(pt.dst[from-a:to-a], page[from-ps:to-ps])
		return true
	}
	if lo > hi { // within one page
		return edge(a / pageSize)
	}
	if lo < hi {
		whole := pt.dst[lo-a : hi-a]
		if _, err := f.ReadAt(whole, int64(hs+lo)); err != nil || h.checkPages(lo/pageSize, whole) != nil {
			return false
		}
	}
	return (a == lo || edge(a/pageSize)) && (hi == b || edge(hi/pageSize))
}

// testHookMidWrite, if set, is called when a block file is half written,
// for the test that kills a process there.
var testHookMidWrite func(tmp string)

// write keeps a block: under a temporary name, synced, then renamed into
// place, so that the name never holds a part of a file.
func (c *Cache) write(pt *part, data []byte) {
	if err := c.writeFile(pt, data); err != nil {
		return // not kept; the read it served is still right
	}
	n := int64(headerSize(len(data), pageSize) + len(data))
	c.sinceScan.Add(n)
	if c.used.Add(n) > c.max || c.sinceScan.Load() >= c.max/8 {
		_ = c.scan() // a failed count leaves the bound to the next
	}
}

func (c *Cache) writeFile(pt *part, data []byte) (err error) {
	f, err := os.CreateTemp(c.tmp, filepath.Base(pt.path)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	head := newHeader(pt.id, pt.i*c.block, data, pageSize).appendTo(nil)
	if _, err := f.Write(head); err != nil {
		return err
	}
	if testHookMidWrite != nil {
		if _, err := f.Write(data[:len(data)/2]); err != nil {
			return err
		}
		testHookMidWrite(f.Name())
		data = data[len(data)/2:]
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	// Written now is used now, to the nanosecond the clock gives: the
	// file system stamps writes with a coarser clock.
	now := time.Now()
	if err := os.Chtimes(f.Name(), now, now); err != nil {
		return err
	}
	err = os.Rename(f.Name(), pt.path)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(pt.path), 0o755); err == nil {
			err = os.Rename(f.Name(), pt.path)
		}
	}
	return err
}

// scan counts the blocks in the folder and, where they exceed the bound,
// removes the least recently read until they are 90% of it. One process
// at a time scans (the others go on), and one goroutine of it.
func (c *Cache) scan() error {
	if !c.scanning.CompareAndSwap(false, true) {
		return nil
	}
	defer c.scanning.Store(false)
	l, ok, err := tryLockFile(filepath.Join(c.locks, "evict.lock"))
	if err != nil || !ok {
		return err
	}
	defer unlock(l)
	type file struct {
		path string
		size int64
		used time.Time
	}
	var files []file
	var total int64
	err = filepath.WalkDir(c.blocks, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed by another process meanwhile
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		files = append(files, file{path, info.Size(), info.ModTime()})
		total += info.Size()
		return nil
	})
	if err != nil {
		return err
	}
	if total > c.max {
		slices.SortFunc(files, func(a, b file) int { return a.used.Compare(b.used) })
		var n int
		var bytes int64
		for _, f := range files {
			if total <= c.max-c.max/10 {
				break
			}
			if os.Remove(f.path) == nil {
				total -= f.size
				n++
				bytes += f.size
			}
		}
		c.evictions.Add(int64(n))
		c.evictedBytes.Add(bytes)
		if n > 0 && c.onEvict != nil {
			c.onEvict(n, bytes)
		}
	}
	c.removeStaleTemps()
	c.used.Store(total)
	c.sinceScan.Store(0)
	return nil
}

// removeStaleTemps removes the temporary files of writers killed long ago.
func (c *Cache) removeStaleTemps() {
	entries, err := os.ReadDir(c.tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > staleTemp {
			os.Remove(filepath.Join(c.tmp, e.Name()))
		}
	}
}

// lockPath is the lock file of a block's stripe.
func (c *Cache) lockPath(pt *part) string {
	stripe := binary.LittleEndian.Uint16(pt.id[:2]) % lockStripes
	return filepath.Join(c.locks, fmt.Sprintf("%03x.lock", stripe))
}

func (c *Cache) tryLock(pt *part) (*os.File, bool, error) {
	l, ok, err := tryLockFile(c.lockPath(pt))
	if err != nil {
		return nil, false, fmt.Errorf("localcache: lock %s: %w", strings.TrimPrefix(c.lockPath(pt), c.dir), err)
	}
	return l, ok, nil
}

// lock waits for a block's lock, polling so that ctx can end the wait.
func (c *Cache) lock(ctx context.Context, pt *part) (*os.File, error) {
	wait := time.Millisecond
	for {
		l, ok, err := c.tryLock(pt)
		if err != nil || ok {
			return l, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		}
		wait = min(2*wait, 16*time.Millisecond)
	}
}
