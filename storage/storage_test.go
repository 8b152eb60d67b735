package storage_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/storage"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func isParquet(key string) bool { return strings.HasSuffix(key, ".parquet") }

// tree writes files (slash-separated paths relative to a fresh directory)
// holding their own names, and returns the directory.
func tree(t *testing.T, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func rels(srcs []storage.Source) []string {
	var out []string
	for _, s := range srcs {
		out = append(out, s.Rel)
	}
	return out
}

func TestResolveLocalDirectory(t *testing.T) {
	dir := tree(t,
		"b.parquet", "a.parquet", "sub/c.parquet", "sub/deeper/d.parquet", "notes.txt",
		"_SUCCESS", ".a.parquet.crc", "_temporary/0/x.parquet", ".hidden/y.parquet", "sub/_SUCCESS", "sub/.c.parquet.crc",
	)
	slashed := filepath.ToSlash(dir)
	for _, c := range []struct {
		url    string
		accept func(string) bool
		want   []string
	}{
		{dir, isParquet, []string{"a.parquet", "b.parquet", "sub/c.parquet", "sub/deeper/d.parquet"}},
		{dir + "/", isParquet, []string{"a.parquet", "b.parquet", "sub/c.parquet", "sub/deeper/d.parquet"}},
		{"file://" + slashed, isParquet, []string{"a.parquet", "b.parquet", "sub/c.parquet", "sub/deeper/d.parquet"}},
		{"file://" + slashed + "/", isParquet, []string{"a.parquet", "b.parquet", "sub/c.parquet", "sub/deeper/d.parquet"}},
		{"file://localhost" + slashed + "/sub", isParquet, []string{"c.parquet", "deeper/d.parquet"}},
		{dir, nil, []string{"a.parquet", "b.parquet", "notes.txt", "sub/c.parquet", "sub/deeper/d.parquet"}},
		// A file named explicitly is kept, whatever accept says.
		{filepath.Join(dir, "notes.txt"), isParquet, []string{"notes.txt"}},
		{"file://" + slashed + "/sub/c.parquet", isParquet, []string{"c.parquet"}},
	} {
		t.Run(c.url, func(t *testing.T) {
			r := storage.NewResolver(storage.Options{})
			defer r.Close()
			srcs, err := r.Resolve(context.Background(), c.url, c.accept)
			if err != nil {
				t.Fatal(err)
			}
			if got := rels(srcs); !slices.Equal(got, c.want) {
				t.Fatalf("Rel = %v, want %v", got, c.want)
			}
			for _, s := range srcs {
				path := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(s.Object.Key, strings.TrimPrefix(slashed, "/")+"/")))
				if want := "file://" + filepath.ToSlash(path); s.URL != want {
					t.Errorf("URL = %q, want %q", s.URL, want)
				}
				st, err := os.Stat(path)
				if err != nil {
					t.Fatalf("%s: %v", s.URL, err)
				}
				if s.Object.Size != st.Size() {
					t.Errorf("%s: Size %d, want %d", s.URL, s.Object.Size, st.Size())
				}
			}
		})
	}
}

func TestResolveRelativePath(t *testing.T) {
	dir := tree(t, "data/x.parquet", "data/y.parquet")
	t.Chdir(dir)
	r := storage.NewResolver(storage.Options{})
	defer r.Close()
	srcs, err := r.Resolve(context.Background(), "data", isParquet)
	if err != nil {
		t.Fatal(err)
	}
	want := "file://" + filepath.ToSlash(filepath.Join(dir, "data", "x.parquet"))
	if len(srcs) != 2 || srcs[0].URL != want {
		t.Errorf("Resolve(\"data\") = %v, want 2 objects, the first %s", rels(srcs), want)
	}
}

func TestResolveGlobs(t *testing.T) {
	var files []string
	for i := range 8 {
		files = append(files, fmt.Sprintf("part-%05d.parquet", i))
	}
	files = append(files, "other.parquet", "sub/part-00009.parquet", "part-00010.txt")
	dir := tree(t, files...)
	for _, c := range []struct {
		pattern string
		want    []string
	}{
		{"*.parquet", append([]string{"other.parquet"}, files[:8]...)},
		{"part-0000[0-3].parquet", files[:4]},
		{"part-?????.parquet", files[:8]},
		{"*/*.parquet", []string{"sub/part-00009.parquet"}}, // * does not cross '/'
		{"part-*", files[:8]},                               // accept drops the .txt
	} {
		t.Run(c.pattern, func(t *testing.T) {
			r := storage.NewResolver(storage.Options{})
			defer r.Close()
			srcs, err := r.Resolve(context.Background(), dir+"/"+c.pattern, isParquet)
			if err != nil {
				t.Fatal(err)
			}
			if got := rels(srcs); !slices.Equal(got, c.want) {
				t.Errorf("Rel = %v, want %v", got, c.want)
			}
		})
	}
	for _, c := range []struct {
		url      string
		sentinel error
	}{
		{dir + "/*.orc", storage.ErrNotFound},
		{dir + "/nothing-*/x.parquet", storage.ErrNotFound},
		{dir + "/part-[.parquet", nil}, // malformed pattern
		{dir + "/missing.parquet", storage.ErrNotFound},
		{filepath.Join(dir, "nodir") + "/", storage.ErrNotFound},
	} {
		t.Run("error "+filepath.Base(c.url), func(t *testing.T) {
			r := storage.NewResolver(storage.Options{})
			defer r.Close()
			srcs, err := r.Resolve(context.Background(), c.url, isParquet)
			if err == nil {
				t.Fatalf("Resolve = %v, want an error", rels(srcs))
			}
			if c.sentinel != nil && !errors.Is(err, c.sentinel) {
				t.Errorf("error does not wrap %v: %v", c.sentinel, err)
			}
			if !strings.Contains(err.Error(), c.url) {
				t.Errorf("error does not name %s: %v", c.url, err)
			}
		})
	}
}

// memOpener serves one memblob bucket for every bucket URL and records the
// URLs it was asked for.
type memOpener struct {
	bucket *blob.Bucket
	asked  []string
}

func (o *memOpener) open(_ context.Context, bucketURL string) (*blob.Bucket, error) {
	o.asked = append(o.asked, bucketURL)
	return o.bucket, nil
}

func memBucket(t *testing.T, objects map[string]string) *blob.Bucket {
	t.Helper()
	b := memblob.OpenBucket(nil)
	for k, v := range objects {
		if err := b.WriteAll(context.Background(), k, []byte(v), nil); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func TestResolveMemThroughOpen(t *testing.T) {
	o := &memOpener{bucket: memBucket(t, map[string]string{
		"data/x.parquet": "xxxx", "data/y.parquet": "yyyyyy", "data/_SUCCESS": "", "other/z.parquet": "z",
	})}
	r := storage.NewResolver(storage.Options{Open: o.open})
	defer r.Close()
	srcs, err := r.Resolve(context.Background(), "mem://bkt/data/", isParquet)
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, s := range srcs {
		urls = append(urls, s.URL)
	}
	if want := []string{"mem://bkt/data/x.parquet", "mem://bkt/data/y.parquet"}; !slices.Equal(urls, want) {
		t.Fatalf("URLs %v, want %v", urls, want)
	}
	if srcs[1].Object.Size != 6 || srcs[1].Rel != "y.parquet" {
		t.Errorf("second object %+v", srcs[1])
	}
	got, err := io.ReadAll(srcs[1].ReaderAt(context.Background()))
	if err != nil || string(got) != "yyyyyy" {
		t.Errorf("read %q, %v", got, err)
	}
	// The same bucket URL opens once; a glob in it works as on disk.
	srcs, err = r.Resolve(context.Background(), "mem://bkt/*/z.parquet", nil)
	if err != nil || len(srcs) != 1 || srcs[0].URL != "mem://bkt/other/z.parquet" {
		t.Errorf("glob: %v, %v", rels(srcs), err)
	}
	if !slices.Equal(o.asked, []string{"mem://bkt"}) {
		t.Errorf("Open called with %v, want once with mem://bkt", o.asked)
	}
}

func TestCountingWrap(t *testing.T) {
	dir := tree(t, "d/a.parquet", "d/b.parquet")
	var (
		counter *storage.Counting
		seen    []string
	)
	r := storage.NewResolver(storage.Options{Wrap: func(b storage.Bucket) storage.Bucket {
		if counter != nil {
			t.Error("Wrap called twice for one bucket")
		}
		counter = storage.NewCounting(b)
		counter.OnRead = func(key string, off int64, n int) {
			seen = append(seen, fmt.Sprintf("%s@%d+%d", filepath.Base(key), off, n))
		}
		return counter
	}})
	defer r.Close()
	srcs, err := r.Resolve(context.Background(), filepath.Join(dir, "d"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// A name that is no object costs a Stat, then the listing.
	if counter.Requests() != 2 || counter.Bytes() != 0 {
		t.Errorf("after Resolve: %d requests, %d bytes; want 2, 0", counter.Requests(), counter.Bytes())
	}
	ra := srcs[0].ReaderAt(context.Background())
	p := make([]byte, 5)
	if _, err := ra.ReadAt(p, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := ra.ReadAt(p, 8); !errors.Is(err, io.EOF) { // "d/a.parquet" is 11 bytes
		t.Fatalf("short read: %v", err)
	}
	if counter.Requests() != 4 || counter.Bytes() != 8 {
		t.Errorf("after reads: %d requests, %d bytes; want 4, 8", counter.Requests(), counter.Bytes())
	}
	if want := []string{"a.parquet@2+5", "a.parquet@8+3"}; !slices.Equal(seen, want) {
		t.Errorf("OnRead saw %v, want %v", seen, want)
	}
	counter.Reset()
	if counter.Requests() != 0 || counter.Bytes() != 0 {
		t.Error("Reset did not zero the counts")
	}
}

func TestReaderSemantics(t *testing.T) {
	o := &memOpener{bucket: memBucket(t, map[string]string{"k": "0123456789"})}
	r := storage.NewResolver(storage.Options{Open: o.open})
	defer r.Close()
	srcs, err := r.Resolve(context.Background(), "mem://b/k", nil)
	if err != nil {
		t.Fatal(err)
	}
	src := srcs[0]
	rd := src.ReaderAt(context.Background())
	if rd.Size() != 10 {
		t.Errorf("Size() = %d", rd.Size())
	}
	for _, c := range []struct {
		len     int
		off     int64
		n       int
		data    string
		wantErr error // nil, io.EOF, or errAny
	}{
		{4, 0, 4, "0123", nil},
		{10, 0, 10, "0123456789", nil},
		{4, 8, 2, "89", io.EOF},
		{4, 10, 0, "", io.EOF},
		{4, 11, 0, "", io.EOF},
		{0, 20, 0, "", nil}, // nothing asked: like *os.File
		{4, -1, 0, "", errAny},
	} {
		p := make([]byte, c.len)
		n, err := rd.ReadAt(p, c.off)
		switch {
		case c.wantErr == errAny && err == nil,
			c.wantErr != errAny && !errors.Is(err, c.wantErr) && !(c.wantErr == nil && err == nil):
			t.Errorf("ReadAt(%d bytes, %d): error %v, want %v", c.len, c.off, err, c.wantErr)
		case n != c.n || string(p[:n]) != c.data:
			t.Errorf("ReadAt(%d bytes, %d) = %d %q, want %d %q", c.len, c.off, n, p[:n], c.n, c.data)
		}
	}

	seek := func(off int64, whence int, want int64) {
		t.Helper()
		got, err := rd.Seek(off, whence)
		if err != nil || got != want {
			t.Errorf("Seek(%d, %d) = %d, %v; want %d", off, whence, got, err, want)
		}
	}
	seek(0, io.SeekEnd, 10)
	seek(-3, io.SeekEnd, 7)
	rest, err := io.ReadAll(rd)
	if err != nil || string(rest) != "789" {
		t.Errorf("ReadAll after Seek = %q, %v", rest, err)
	}
	if n, err := rd.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("Read at the end = %d, %v; want 0, io.EOF", n, err)
	}
	seek(2, io.SeekStart, 2)
	seek(3, io.SeekCurrent, 5)
	if _, err := rd.Seek(-1, io.SeekStart); err == nil {
		t.Error("Seek to a negative offset succeeded")
	}
	if _, err := rd.Seek(0, 42); err == nil {
		t.Error("Seek with a bad whence succeeded")
	}

	// An object that shrank since it was listed: a short read is an error.
	stale := src
	stale.Object.Size = 20
	if _, err := stale.ReaderAt(context.Background()).ReadAt(make([]byte, 15), 0); !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "mem://b/k") {
		t.Errorf("read of a shrunk object: %v, want io.ErrUnexpectedEOF naming it", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := src.ReaderAt(ctx).ReadAt(make([]byte, 4), 0); !errors.Is(err, context.Canceled) {
		t.Errorf("read with a canceled context: %v", err)
	}
}

var errAny = errors.New("any error")

// failingBucket fails every call with an error that quotes a secret, as a
// careless driver might.
type failingBucket struct {
	storage.Bucket
	msg string
}

func (b failingBucket) List(context.Context, string) ([]storage.Object, error) {
	return nil, errors.New(b.msg)
}

func (b failingBucket) Stat(context.Context, string) (storage.Object, error) {
	return storage.Object{}, errors.New(b.msg)
}

func TestErrorsCarryNoSecrets(t *testing.T) {
	const secret = "SeCrEt-0123456789"
	errOpen := errors.New("opener failed")
	for _, c := range []struct {
		name string
		url  string
		opts storage.Options
		is   error
	}{
		// Schemes with no driver linked in: a test must not reach a cloud.
		{"no driver for the scheme", "nosuch://b/k?access_key=" + secret, storage.Options{}, nil},
		{"opener quotes the URL", "gs://b/k?token=" + secret, storage.Options{Open: func(_ context.Context, u string) (*blob.Bucket, error) {
			return nil, fmt.Errorf("%w: cannot open %s", errOpen, u)
		}}, errOpen},
		{"opener quotes the unescaped value", "gs://b/k?sig=" + secret + "%2Fx", storage.Options{Open: func(_ context.Context, u string) (*blob.Bucket, error) {
			return nil, fmt.Errorf("signature %s/x refused", secret)
		}}, nil},
		{"glob matches nothing", "mem://b/x/*.parquet?token=" + secret, storage.Options{Open: func(context.Context, string) (*blob.Bucket, error) {
			return memblob.OpenBucket(nil), nil
		}}, storage.ErrNotFound},
		{"missing object", "mem://b/x.parquet?token=" + secret, storage.Options{Open: func(context.Context, string) (*blob.Bucket, error) {
			return memblob.OpenBucket(nil), nil
		}}, storage.ErrNotFound},
		{"driver error quotes the query", "mem://b/x.parquet?token=" + secret, storage.Options{
			Open: func(context.Context, string) (*blob.Bucket, error) { return memblob.OpenBucket(nil), nil },
			Wrap: func(b storage.Bucket) storage.Bucket { return failingBucket{b, "denied for token=" + secret} },
		}, nil},
		{"user information", "nosuch://AKIA:" + secret + "@b/k", storage.Options{}, nil},
		{"malformed URL", "nosuch://b%zz/k?token=" + secret, storage.Options{}, nil},
		{"file URL with a host", "file://host/k?token=" + secret, storage.Options{}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := storage.NewResolver(c.opts)
			defer r.Close()
			_, err := r.Resolve(context.Background(), c.url, nil)
			if err == nil {
				t.Fatal("Resolve succeeded")
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(fmt.Sprintf("%+v", err), secret) {
				t.Errorf("error shows the secret: %v", err)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error does not wrap %v: %v", c.is, err)
			}
		})
	}
}

func TestCloseClosesBuckets(t *testing.T) {
	b := memBucket(t, map[string]string{"k": "v"})
	r := storage.NewResolver(storage.Options{Open: func(context.Context, string) (*blob.Bucket, error) { return b, nil }})
	srcs, err := r.Resolve(context.Background(), "mem://b/k", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := srcs[0].ReaderAt(context.Background()).ReadAt(make([]byte, 1), 0); err == nil {
		t.Error("read through a closed resolver's bucket succeeded")
	}
}

// inFlight counts the reads in progress through it, and the most seen at
// once; while gate is set, each read waits in it until gate closes.
type inFlight struct {
	storage.Bucket
	gate    chan struct{}
	entered chan struct{}
	mu      sync.Mutex
	now     int
	most    int
}

func (f *inFlight) ReadAt(ctx context.Context, obj storage.Object, p []byte, off int64) (int, error) {
	f.mu.Lock()
	f.now++
	f.most = max(f.most, f.now)
	gate := f.gate
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.now--
		f.mu.Unlock()
	}()
	if gate != nil {
		f.entered <- struct{}{}
		<-gate
	}
	return f.Bucket.ReadAt(ctx, obj, p, off)
}

// MaxRequests bounds the reads in flight to one bucket, a wrapper's time
// included; a read waiting for a slot ends with its context. It runs in a
// synctest bubble: synctest.Wait returns once every read is held in the
// wrapper or waits for a slot, so a read past the bound would have entered
// by then, and the deadline passes only once the read waits for a slot.
func TestMaxRequests(t *testing.T) { synctest.Test(t, testMaxRequests) }

func testMaxRequests(t *testing.T) {
	dir := tree(t, "a.parquet")
	for _, c := range []struct{ max, want int }{{3, 3}, {0, 64}, {-1, 80}} {
		var f *inFlight
		r := storage.NewResolver(storage.Options{MaxRequests: c.max, Wrap: func(b storage.Bucket) storage.Bucket {
			f = &inFlight{Bucket: b}
			return f
		}})
		defer r.Close()
		srcs, err := r.Resolve(context.Background(), filepath.Join(dir, "a.parquet"), nil)
		if err != nil {
			t.Fatal(err)
		}
		read := func(ctx context.Context) error {
			_, err := srcs[0].ReaderAt(ctx).ReadAt(make([]byte, 4), 0)
			return err
		}
		// 80 reads at once, held in the wrapper: the bound's worth enter,
		// and no more while they are held.
		f.gate, f.entered = make(chan struct{}), make(chan struct{}, 80)
		var g errgroup.Group
		for range 80 {
			g.Go(func() error { return read(context.Background()) })
		}
		for range c.want {
			<-f.entered
		}
		synctest.Wait()
		f.mu.Lock()
		most := f.most
		f.mu.Unlock()
		close(f.gate)
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
		if most != c.want {
			t.Errorf("MaxRequests %d: %d reads in flight at most, want %d", c.max, most, c.want)
		}
		if c.max != 3 {
			continue
		}
		// Hold every slot, then ask for one more with a deadline.
		f.gate, f.entered = make(chan struct{}), make(chan struct{}, 3)
		var holders errgroup.Group
		for range 3 {
			holders.Go(func() error { return read(context.Background()) })
		}
		for range 3 {
			<-f.entered
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err = read(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a read waiting for a slot past its deadline: %v, want context.DeadlineExceeded", err)
		}
		close(f.gate)
		if err := holders.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}
