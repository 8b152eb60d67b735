package localcache

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicedata/sluice/storage"
)

// The tests that need another process run this test binary again with
// childEnv set to what the child does; it reads its arguments from the
// variables below and reports on stdout.
const (
	childEnv     = "SLUICE_LOCALCACHE_CHILD"
	childObject  = "SLUICE_LOCALCACHE_OBJECT"
	childDir     = "SLUICE_LOCALCACHE_DIR"
	childSeed    = "SLUICE_LOCALCACHE_SEED"
	childBlock   = "SLUICE_LOCALCACHE_BLOCK"
	childLatency = 3 * time.Millisecond
)

func TestMain(m *testing.M) {
	if what := os.Getenv(childEnv); what != "" {
		if err := runChild(what); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// content is the deterministic bytes of a test object.
func content(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// object writes data to a local file and resolves it as a real bucket
// does, returning the source.
func object(tb testing.TB, data []byte) storage.Source {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "part.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return resolve(tb, path)
}

func resolve(tb testing.TB, path string) storage.Source {
	tb.Helper()
	r := storage.NewResolver(storage.Options{})
	tb.Cleanup(func() { r.Close() })
	srcs, err := r.Resolve(context.Background(), path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return srcs[0]
}

// cached is src read through c, with the bytes that reach the bucket
// counted.
func cached(c *Cache, src storage.Source) (storage.Source, *storage.Counting) {
	counted := storage.NewCounting(src.Bucket)
	src.Bucket = c.Wrap("file:///", counted)
	return src, counted
}

func open(tb testing.TB, o Options) *Cache {
	tb.Helper()
	c, err := Open(o)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// readRange reads [off, off+n) of src and checks it against want.
func readRange(tb testing.TB, src storage.Source, want []byte, off, n int) {
	tb.Helper()
	got := make([]byte, n)
	if _, err := src.ReaderAt(context.Background()).ReadAt(got, int64(off)); err != nil {
		tb.Fatalf("read %d+%d: %v", off, n, err)
	}
	if !bytes.Equal(got, want[off:off+n]) {
		tb.Fatalf("read %d+%d: wrong bytes", off, n)
	}
}

// TestHitsAndRestart: a second read of any range is served from the
// folder with the bytes the object holds, also by a cache opened on the
// folder afterwards (a restarted process); misses fetch whole blocks once.
func TestHitsAndRestart(t *testing.T) {
	// Blocks of a part of a page, and of pages and a part (reads then
	// check whole pages in place and partial ones at their ends).
	for _, block := range []int{10_000, 3*pageSize + 5000} {
		t.Run(strconv.Itoa(block), func(t *testing.T) { testHitsAndRestart(t, block) })
	}
}

func testHitsAndRestart(t *testing.T, block int) {
	data := content(1, 9*block+1234)
	dir := t.TempDir()
	c := open(t, Options{Dir: dir, BlockBytes: int64(block), MaxBytes: 1 << 30})
	obj := object(t, data)
	src, counted := cached(c, obj)
	r := rand.New(rand.NewPCG(2, 2))
	for range 200 {
		off := r.IntN(len(data))
		readRange(t, src, data, off, 1+r.IntN(len(data)-off))
	}
	if got := counted.Bytes(); got != int64(len(data)) {
		t.Fatalf("fetched %d bytes from the bucket, want each block once: %d", got, len(data))
	}
	if s := c.Stats(); s.FetchedBytes != int64(len(data)) || s.HitBytes == 0 {
		t.Fatalf("stats %+v", s)
	}

	again := open(t, Options{Dir: dir, BlockBytes: int64(block), MaxBytes: 1 << 30})
	src2, counted2 := cached(again, obj)
	readRange(t, src2, data, 0, len(data))
	if got := counted2.Bytes(); got != 0 {
		t.Fatalf("after a restart, %d bytes fetched from the bucket; want 0", got)
	}
	if s := again.Stats(); s.HitBytes != int64(len(data)) {
		t.Fatalf("after a restart, %d bytes from the cache, want %d", s.HitBytes, len(data))
	}
}

// TestCorruptBlockRefetched: a block file whose bytes or header changed
// on disk is not served: the block is fetched again and rewritten.
func TestCorruptBlockRefetched(t *testing.T) {
	const block = 8192
	data := content(3, 3*block)
	c := open(t, Options{Dir: t.TempDir(), BlockBytes: block, MaxBytes: 1 << 20})
	src, counted := cached(c, object(t, data))
	readRange(t, src, data, 0, len(data))
	b := src.Bucket.(*bucket)
	for _, damage := range []func(path string) error{
		func(path string) error { return flipByte(path, -100) }, // the block's bytes
		func(path string) error { return flipByte(path, 45) },   // the header's offset
		func(path string) error { return os.Truncate(path, 100) },
	} {
		pt := b.part(src.Object, 1)
		if err := damage(pt.path); err != nil {
			t.Fatal(err)
		}
		counted.Reset()
		readRange(t, src, data, block+10, 100)
		if got := counted.Bytes(); got != block {
			t.Fatalf("a damaged block: %d bytes fetched, want the block again (%d)", got, block)
		}
		counted.Reset()
		readRange(t, src, data, block, block)
		if got := counted.Bytes(); got != 0 {
			t.Fatalf("the block fetched again was not kept: %d bytes fetched", got)
		}
	}
}

func flipByte(path string, at int64) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if at < 0 {
		at += int64(len(b))
	}
	b[at] ^= 0x40
	return os.WriteFile(path, b, 0o644)
}

// TestChangedVersionNotServed: an object rewritten at the same size is
// another version; a read planned on the new one gets the new bytes from
// the bucket, never the old version's blocks, which still serve reads
// pinned to the old version.
func TestChangedVersionNotServed(t *testing.T) {
	const block = 4096
	v1, v2 := content(4, 5*block), content(5, 5*block)
	path := filepath.Join(t.TempDir(), "part.bin")
	if err := os.WriteFile(path, v1, 0o644); err != nil {
		t.Fatal(err)
	}
	c := open(t, Options{Dir: t.TempDir(), BlockBytes: block, MaxBytes: 1 << 20})
	old, counted := cached(c, resolve(t, path))
	readRange(t, old, v1, 0, len(v1))

	// In place (the same inode), a second later: only the time tells.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(v2, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	later := old.Object.ModTime.Add(time.Second)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	fresh := resolve(t, path)
	if fresh.Object.Version != old.Object.Version || fresh.Object.Size != old.Object.Size {
		t.Fatalf("the rewrite should keep the inode and size: %+v then %+v", old.Object, fresh.Object)
	}
	fresh.Bucket = old.Bucket
	counted.Reset()
	readRange(t, fresh, v2, 0, len(v2))
	if got := counted.Bytes(); got != int64(len(v2)) {
		t.Fatalf("the new version: %d bytes from the bucket, want all %d", got, len(v2))
	}
	// The old plan's reads get the old version's bytes: those it is pinned
	// to, kept from before the rewrite.
	counted.Reset()
	readRange(t, old, v1, 0, len(v1))
	if got := counted.Bytes(); got != 0 {
		t.Fatalf("the old version's blocks: %d bytes from the bucket, want 0", got)
	}
	// A block of the old version the cache lacks is not fetched mixed
	// with the new: the bucket refuses the changed file.
	c2 := open(t, Options{Dir: t.TempDir(), BlockBytes: block, MaxBytes: 1 << 20})
	old.Bucket = c2.Wrap("file:///", storage.NewCounting(fresh.Bucket.(*bucket).Bucket))
	_, err = old.ReaderAt(context.Background()).ReadAt(make([]byte, 10), 0)
	if !errors.Is(err, storage.ErrChanged) {
		t.Fatalf("a read pinned to the old version, not cached: %v, want ErrChanged", err)
	}
}

// TestEvictionLeastRecentlyUsed: past the bound, the blocks read longest
// ago go first, down to 90% of it; those read again stay.
func TestEvictionLeastRecentlyUsed(t *testing.T) {
	const block = 4096
	fileBytes := int64(headerSize(block, pageSize) + block)
	data := content(6, 20*block)
	c := open(t, Options{Dir: t.TempDir(), BlockBytes: block, MaxBytes: 10 * fileBytes})
	src, counted := cached(c, object(t, data))
	b := src.Bucket.(*bucket)
	readBlocks := func(blocks ...int) {
		for _, i := range blocks {
			readRange(t, src, data, i*block, block)
		}
	}
	readBlocks(0, 1, 2, 3, 4, 5, 6, 7)
	readBlocks(1, 0) // read again: now the most recent but for what follows
	readBlocks(8, 9) // ten blocks: at the bound
	if s := c.Stats(); s.Evictions != 0 {
		t.Fatalf("%d evictions at the bound, want none", s.Evictions)
	}
	readBlocks(10) // past it: down to nine blocks, the oldest two leave
	var kept []int
	for i := range 20 {
		if _, err := os.Stat(b.part(src.Object, int64(i)).path); err == nil {
			kept = append(kept, i)
		}
	}
	if want := []int{0, 1, 4, 5, 6, 7, 8, 9, 10}; !slices.Equal(kept, want) {
		t.Fatalf("blocks kept %v, want %v", kept, want)
	}
	if s := c.Stats(); s.Evictions != 2 || s.EvictedBytes != 2*fileBytes {
		t.Fatalf("stats %+v, want 2 evictions of %d bytes", s, 2*fileBytes)
	}
	counted.Reset()
	readBlocks(0, 1)
	if counted.Bytes() != 0 {
		t.Fatal("blocks read recently were evicted")
	}
	readBlocks(2)
	if counted.Bytes() != block {
		t.Fatalf("an evicted block: %d bytes fetched, want %d", counted.Bytes(), block)
	}
}

// TestOptionsRefused: a bound that holds fewer than two blocks, or no
// folder, is refused.
func TestOptionsRefused(t *testing.T) {
	for _, o := range []Options{{}, {Dir: t.TempDir(), MaxBytes: 100, BlockBytes: 64}, {Dir: t.TempDir(), BlockBytes: -1}} {
		if _, err := Open(o); err == nil {
			t.Errorf("Open(%+v) succeeded", o)
		}
	}
}

// child starts this test binary as a child doing what, on the object at
// path with the cache in dir.
func child(t *testing.T, what, path, dir string, block int) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+what, childObject+"="+path, childDir+"="+dir, childBlock+"="+strconv.Itoa(block))
	cmd.Stderr = os.Stderr
	return cmd
}

// runChild is a child process: "read" reads the whole object through the
// cache in ranges of random sizes from four goroutines, checking every
// byte, and prints the bytes it fetched from the bucket; "die" starts
// writing the first block and stops half way, printing the temporary
// file's name, to be killed there.
func runChild(what string) error {
	seed, _ := strconv.ParseUint(os.Getenv(childSeed), 10, 64)
	block, _ := strconv.Atoi(os.Getenv(childBlock))
	c, err := Open(Options{Dir: os.Getenv(childDir), BlockBytes: int64(block), MaxBytes: 1 << 30})
	if err != nil {
		return err
	}
	r := storage.NewResolver(storage.Options{})
	defer r.Close()
	srcs, err := r.Resolve(context.Background(), os.Getenv(childObject), nil)
	if err != nil {
		return err
	}
	src := srcs[0]
	want, err := os.ReadFile(os.Getenv(childObject))
	if err != nil {
		return err
	}
	counted := storage.NewCounting(&slow{src.Bucket})
	src.Bucket = c.Wrap("file:///", counted)
	switch what {
	case "die":
		testHookMidWrite = func(tmp string) {
			fmt.Println(tmp)
			select {} // killed here
		}
		_, err := src.ReaderAt(context.Background()).ReadAt(make([]byte, 10), 0)
		return err
	case "read":
		var g sync.WaitGroup
		errs := make(chan error, 4)
		for w := range 4 {
			g.Go(func() {
				rng := rand.New(rand.NewPCG(seed, uint64(w)))
				for off := 0; off < len(want); {
					n := min(len(want)-off, 1+rng.IntN(3*block))
					got := make([]byte, n)
					if _, err := src.ReaderAt(context.Background()).ReadAt(got, int64(off)); err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(got, want[off:off+n]) {
						errs <- fmt.Errorf("wrong bytes at %d+%d", off, n)
						return
					}
					off += n
				}
			})
		}
		g.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
		fmt.Println(counted.Bytes())
		return nil
	}
	return fmt.Errorf("unknown child %q", what)
}

// slow is a bucket as far away as an object store, so that processes
// reading at once overlap.
type slow struct{ storage.Bucket }

func (s *slow) ReadAt(ctx context.Context, obj storage.Object, p []byte, off int64) (int, error) {
	time.Sleep(childLatency)
	return s.Bucket.ReadAt(ctx, obj, p, off)
}

// TestProcessesShareFetches: four processes reading one object through one
// folder at once, each from four goroutines in ranges of their own sizes,
// fetch every block once between them, and every byte each reads is the
// object's.
func TestProcessesShareFetches(t *testing.T) {
	const block = 16 << 10
	data := content(8, 64*block+777)
	path := filepath.Join(t.TempDir(), "part.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for i := range 4 {
		cmd := child(t, "read", path, dir, block)
		cmd.Env = append(cmd.Env, childSeed+"="+strconv.Itoa(i))
		out := &bytes.Buffer{}
		cmd.Stdout = out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	var total int64
	var each []int64
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(outs[i].String()), 10, 64)
		if err != nil {
			t.Fatalf("process %d printed %q", i, outs[i])
		}
		total += n
		each = append(each, n)
	}
	if total != int64(len(data)) {
		t.Fatalf("the processes fetched %v bytes, %d in all; want each block once, %d", each, total, len(data))
	}
}

// TestKilledWriterLeavesNothingValid: a process killed (SIGKILL) half way
// through writing a block, holding its lock, leaves a torn temporary file
// that no reader takes: the block is fetched again, whole, without
// waiting on the dead process's lock. The torn bytes put where the block
// belongs (as a cache writing in place would leave them) are refused too.
func TestKilledWriterLeavesNothingValid(t *testing.T) {
	const block = 64 << 10
	data := content(9, 3*block)
	path := filepath.Join(t.TempDir(), "part.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := child(t, "die", path, dir, block)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child did not reach the middle of its write: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the child exited by itself")
	}
	tmp := strings.TrimSpace(line)
	torn, err := os.ReadFile(tmp)
	if err != nil {
		t.Fatalf("the torn file: %v", err)
	}
	if want := headerSize(block, pageSize) + block/2; len(torn) != want {
		t.Fatalf("the torn file has %d bytes, want %d (header and half the block)", len(torn), want)
	}

	c := open(t, Options{Dir: dir, BlockBytes: block, MaxBytes: 1 << 30})
	src, counted := cached(c, resolve(t, path))
	pt := src.Bucket.(*bucket).part(src.Object, 0)
	if _, err := os.Stat(pt.path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the block's file exists after its writer was killed: %v", err)
	}
	// Where a cache that wrote in place would have left it.
	if err := os.MkdirAll(filepath.Dir(pt.path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pt.path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := make([]byte, block)
	if _, err := src.ReaderAt(ctx).ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data[:block]) {
		t.Fatal("the block read after the torn write is wrong")
	}
	if counted.Bytes() != block {
		t.Fatalf("%d bytes fetched, want the block again (%d)", counted.Bytes(), block)
	}
}

// TestWaitForLockEndsWithContext: a read waiting for a block another
// process is fetching (its lock held) ends when its context does, and
// reads the block once the lock is free.
func TestWaitForLockEndsWithContext(t *testing.T) {
	const block = 4096
	data := content(13, 2*block)
	c := open(t, Options{Dir: t.TempDir(), BlockBytes: block, MaxBytes: 1 << 20})
	src, counted := cached(c, object(t, data))
	held, ok, err := tryLockFile(c.lockPath(src.Bucket.(*bucket).part(src.Object, 1)))
	if err != nil || !ok {
		t.Fatalf("lock: %v %v", ok, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = src.ReaderAt(ctx).ReadAt(make([]byte, 10), block+5)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read waiting on a held lock: %v, want the context's deadline", err)
	}
	unlock(held)
	readRange(t, src, data, block+5, 10)
	if counted.Bytes() != block {
		t.Fatalf("%d bytes fetched, want the block once (%d)", counted.Bytes(), block)
	}
}
