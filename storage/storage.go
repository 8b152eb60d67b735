package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/memblob" // mem:// for tests and small jobs
	"gocloud.dev/gcerrors"

	"github.com/sluicedata/sluice/storage/internal/httppool"
)

// ErrNotFound is wrapped when a URL matches no object.
var ErrNotFound = errors.New("not found")

// ErrNoDataFiles is wrapped when a directory, prefix or glob exists, or
// matches objects, but holds no object the caller accepts: an empty
// directory, one of Spark's with only _SUCCESS, one of the wrong format. It
// is also ErrNotFound, since the URL names no data either way, but says which
// of the two it is: "not found" sends a user looking for a typo in a path
// that is right.
var ErrNoDataFiles error = noDataFiles{}

type noDataFiles struct{}

func (noDataFiles) Error() string        { return "no data files" }
func (noDataFiles) Is(target error) bool { return target == ErrNotFound }

// Object describes one stored object.
type Object struct {
	Key     string
	Size    int64
	ModTime time.Time
	ETag    string
	// Version is the version of the object that reads are pinned to, as
	// its store names it: the ETag on S3 and Azure, the generation on GCS,
	// the inode number of a local file (whose size and modification time
	// are checked too). "" where the store names none (mem://, or an
	// object described without one): reads then check no version, though
	// a local file's size and modification time still.
	Version string
}

// Bucket is what sluice needs of an object store. Implementations must be
// safe for concurrent use.
type Bucket interface {
	// List returns every object whose key starts with prefix, sorted by key,
	// so that a plan is the same wherever it is made.
	List(ctx context.Context, prefix string) ([]Object, error)
	// Stat returns one object's attributes, wrapping ErrNotFound if missing.
	Stat(ctx context.Context, key string) (Object, error)
	// ReadAt fills p from obj at off, where obj is the object as List or
	// Stat described it: a bucket reads that version of it only, and fails
	// wrapping ErrChanged where the key names another now (a ChangedError
	// says which), so that no read mixes the bytes of two versions. It
	// returns io.ErrUnexpectedEOF (wrapped) when the object ends before p
	// is full.
	ReadAt(ctx context.Context, obj Object, p []byte, off int64) (int, error)
	// Scheme names the backend ("file", "mem", "s3", ...) for accounting.
	Scheme() string
	Close() error
}

// Opener opens the bucket named by a bucket URL (scheme, host and query, no
// key), such as "s3://bucket?region=us-east-1" or "mem://".
type Opener func(ctx context.Context, bucketURL string) (*blob.Bucket, error)

// Options configure a Resolver.
type Options struct {
	// Open opens buckets for every scheme but file (and plain paths), which
	// are always opened on the local file system. Default: the driver the
	// program links for the scheme (see Register), else blob.OpenBucket
	// (mem:// always).
	// Note that every blob.OpenBucket("mem://") is a new, empty bucket: to
	// read a mem bucket you wrote, return it from Open.
	Open Opener
	// Wrap, if set, wraps every bucket the resolver opens, for accounting
	// or fault injection. Default: none.
	Wrap func(Bucket) Bucket
	// Retry is how every bucket retries transient failures; it wraps
	// whatever Wrap returns, so wrapped accounting counts every attempt.
	// Default: see RetryPolicy.
	Retry RetryPolicy
	// MaxRequests bounds the requests in flight to one bucket (reads, lists
	// and stats; each attempt of a retried one). Default 64: as many as
	// the S3, GCS and Azure drivers keep idle connections per host, so
	// that the requests take turns on them (a request beyond a client's
	// pool opens a connection, uses it once and closes it, paying a TCP
	// and, on a real store, a TLS handshake), and enough that the bytes in
	// flight are bounded by Limits.FetchAheadBytes rather than by a count:
	// at latency L, requests of B bytes deliver at most MaxRequests × B /
	// L (64 requests of 1 MiB 100 ms away: 670 MB/s; 16, the default
	// before, bound a stream to a quarter of that). A bucket of the
	// program's own (Open) over Go's default transport keeps 2 idle
	// connections per host: lower it there. Negative: no bound.
	MaxRequests int
	// Cache, if set, wraps every bucket but the local file system's,
	// outermost, with a cache of the bytes read from it (such as
	// (*localcache.Cache).Wrap): outside Retry and MaxRequests, so that a
	// read served from the cache is no request and waits on no slot, and
	// a fetch it makes is retried. It is handed the bucket's URL without
	// its query, which names the bucket and carries no credentials.
	// Default: none.
	Cache func(bucketURL string, b Bucket) Bucket
}

// defaultMaxRequests is the pool each of sluice's cloud drivers keeps, so
// that a bucket's requests in flight never outnumber its idle connections.
const defaultMaxRequests = httppool.IdleConnsPerHost

// Resolver turns URLs into objects and keeps the buckets it opened, one per
// bucket URL, until Close.
type Resolver struct {
	opts    Options
	mu      sync.Mutex
	buckets map[string]Bucket
}

// NewResolver returns a resolver with the given options.
func NewResolver(opts Options) *Resolver {
	return &Resolver{opts: opts, buckets: map[string]Bucket{}}
}

// Source is one object that a URL resolved to.
type Source struct {
	// URL names the object for errors and logs; it carries no credentials.
	URL string
	// Rel is the key relative to the root of the URL it was found under, so
	// the same dataset copied elsewhere has the same Rel keys.
	Rel    string
	Bucket Bucket
	Object Object
}

// ReaderAt returns a reader of the object at ctx. It also implements
// io.Seeker (for readers that find the size by seeking to the end) and
// reports Size.
func (s Source) ReaderAt(ctx context.Context) *Reader {
	return &Reader{ctx: ctx, src: s}
}

// Resolve expands rawURL into the objects it names, sorted by key:
//   - an object URL or path: that object;
//   - a directory or prefix (a trailing slash, or no object of that name):
//     every object below it whose name does not start with '.' or '_'
//     (Spark's _SUCCESS, checksum files), at any depth;
//   - a glob (*, ?, [...] in the key, matched with path.Match, so * does not
//     cross '/'): every object that matches. A key with those characters
//     that names an object (data[1].csv, a*b.parquet; one Stat tells) is
//     that object, and a local path that names a directory is that
//     directory: a name that exists is read before a pattern is expanded.
//
// accept, if not nil, filters directory and glob listings by key (an object
// named explicitly is always kept).
func (r *Resolver) Resolve(ctx context.Context, rawURL string, accept func(key string) bool) (_ []Source, err error) {
	loc, err := parseLocation(rawURL)
	if err != nil {
		return nil, err
	}
	// Errors name the URL without its query, and whatever the bucket driver
	// says is scrubbed of it too: that is where credentials travel.
	shown := redact(rawURL)
	defer func() { err = scrub(err, loc.query) }()
	b, err := r.bucket(ctx, loc)
	if err != nil {
		return nil, err
	}
	display := func(key string) string { return loc.display(key) }
	pattern := hasMeta(loc.key)
	if pattern && !strings.HasSuffix(loc.key, "/") {
		// A name that exists is that object before it is a pattern:
		// data[1].csv and a*b.parquet are names writers give. One Stat (a
		// HEAD on an object store) tells; any failure leaves it a pattern.
		if o, err := b.Stat(ctx, loc.key); err == nil {
			return []Source{{URL: display(o.Key), Rel: path.Base(o.Key), Bucket: b, Object: o}}, nil
		}
	}
	if pattern && loc.scheme == "file" && isDir(loc) {
		// A local directory of that name is listed as a directory. (On an
		// object store a prefix is no object a HEAD finds: a pattern there
		// that is also a prefix stays a pattern.)
		pattern = false
	}
	if pattern {
		if _, err := path.Match(loc.key, ""); err != nil {
			return nil, fmt.Errorf("glob %s: %w", shown, err)
		}
		root := globRoot(loc.key)
		objs, err := b.List(ctx, root)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", loc.display(root), err)
		}
		var out []Source
		var rejected skipped
		for _, o := range objs {
			ok, _ := path.Match(loc.key, o.Key) // the pattern is valid: checked above
			if !ok {
				continue
			}
			rel := strings.TrimPrefix(o.Key, root)
			if accept != nil && !accept(o.Key) {
				rejected.add(rel, false)
				continue
			}
			out = append(out, Source{URL: display(o.Key), Rel: rel, Bucket: b, Object: o})
		}
		if len(out) == 0 && rejected.other > 0 {
			return nil, fmt.Errorf("%s: %w match the pattern (%s)", shown, ErrNoDataFiles, rejected)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%s: no object matches the pattern: %w", shown, ErrNotFound)
		}
		return out, nil
	}
	if loc.key != "" && !strings.HasSuffix(loc.key, "/") {
		o, err := b.Stat(ctx, loc.key)
		if err == nil {
			return []Source{{URL: display(o.Key), Rel: path.Base(o.Key), Bucket: b, Object: o}}, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("%s: %w", shown, err)
		}
		loc.key += "/"
	}
	objs, err := b.List(ctx, loc.key)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", shown, err)
	}
	var out []Source
	var rejected skipped
	for _, o := range objs {
		rel := strings.TrimPrefix(o.Key, loc.key)
		if rel == "" || strings.HasSuffix(rel, "/") {
			rejected.markers++ // a "folder" made in a console: the prefix exists
			continue
		}
		if hidden := hiddenPath(rel); hidden || (accept != nil && !accept(o.Key)) {
			rejected.add(rel, hidden)
			continue
		}
		out = append(out, Source{URL: display(o.Key), Rel: rel, Bucket: b, Object: o})
	}
	if len(out) > 0 {
		return out, nil
	}
	what := "prefix"
	if loc.scheme == "file" {
		what = "directory"
		if st, err := os.Stat(filepath.FromSlash(path.Join(loc.root, loc.key))); err == nil && st.IsDir() {
			rejected.markers++
		}
	}
	if rejected.any() {
		return nil, fmt.Errorf("%s: a %s with %w (%s)", shown, what, ErrNoDataFiles, rejected)
	}
	return nil, fmt.Errorf("%s: no object found: %w", shown, ErrNotFound)
}

// skipped counts what a listing held besides the objects it returns, for the
// error that says why a directory that exists gave nothing.
type skipped struct {
	hidden, other      int
	firstHidden, first string // an example of each
	markers            int    // directory markers, or the local directory itself
}

func (s *skipped) add(rel string, hidden bool) {
	if hidden {
		if s.hidden++; s.hidden == 1 {
			s.firstHidden = rel
		}
		return
	}
	if s.other++; s.other == 1 {
		s.first = rel
	}
}

func (s skipped) any() bool { return s.hidden+s.other+s.markers > 0 }

func (s skipped) String() string {
	var parts []string
	if s.other > 0 {
		parts = append(parts, fmt.Sprintf("%s of another format, such as %s", files(s.other), s.first))
	}
	if s.hidden > 0 {
		parts = append(parts, fmt.Sprintf("%s skipped for a name starting with '.' or '_', such as %s", files(s.hidden), s.firstHidden))
	}
	if len(parts) == 0 {
		return "empty"
	}
	return strings.Join(parts, "; ")
}

func files(n int) string {
	if n == 1 {
		return "1 file"
	}
	return fmt.Sprintf("%d files", n)
}

// Close closes every bucket the resolver opened.
func (r *Resolver) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, b := range r.buckets {
		errs = append(errs, b.Close())
	}
	r.buckets = map[string]Bucket{}
	return errors.Join(errs...)
}

func (r *Resolver) bucket(ctx context.Context, loc location) (Bucket, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, ok := r.buckets[loc.bucketURL]; ok {
		return b, nil
	}
	var (
		bb  *blob.Bucket
		err error
	)
	if loc.scheme == "file" {
		bb, err = fileblob.OpenBucket(loc.root, &fileblob.Options{NoTempDir: true})
	} else if r.opts.Open != nil {
		bb, err = r.opts.Open(ctx, loc.bucketURL)
	} else {
		bb, err = OpenBucket(ctx, loc.bucketURL)
	}
	if err != nil {
		err = scrub(err, loc.query)
		if strings.HasPrefix(err.Error(), "open bucket ") { // gocloud's URL openers say it themselves
			return nil, err
		}
		return nil, fmt.Errorf("open bucket %s: %w", loc.shown, err)
	}
	var b Bucket = &blobBucket{b: bb, scheme: loc.scheme, query: loc.query, drv: driverFor(loc.scheme)}
	if r.opts.Wrap != nil {
		b = r.opts.Wrap(b)
	}
	// Outside Wrap, so that latency a wrapper adds holds a slot as a slow
	// server would; inside Retrying, so that a backoff does not.
	if n := r.opts.MaxRequests; n >= 0 {
		if n == 0 {
			n = defaultMaxRequests
		}
		b = &limited{Bucket: b, slots: make(chan struct{}, n)}
	}
	b = Retrying(b, r.opts.Retry)
	if r.opts.Cache != nil && loc.scheme != "file" {
		b = r.opts.Cache(loc.shown, b)
	}
	r.buckets[loc.bucketURL] = b
	return b, nil
}

// location is a parsed URL: which bucket, and which key, prefix or glob in it.
type location struct {
	scheme    string
	bucketURL string // cache key and opener argument
	root      string // file scheme: the directory the bucket is rooted at
	key       string
	shown     string // bucketURL without its query, for messages
	query     string // the raw query: options, and maybe credentials
}

func (l location) display(key string) string {
	if l.scheme == "file" {
		return "file://" + path.Join(filepath.ToSlash(l.root), key)
	}
	return l.shown + "/" + key
}

func parseLocation(raw string) (location, error) {
	if raw == "" {
		return location{}, errors.New("empty URL")
	}
	if !strings.Contains(raw, "://") {
		abs, err := filepath.Abs(raw)
		if err != nil {
			return location{}, fmt.Errorf("path %s: %w", raw, err)
		}
		if strings.HasSuffix(raw, "/") || strings.HasSuffix(raw, string(filepath.Separator)) {
			abs += "/"
		}
		return fileLocation(filepath.ToSlash(abs))
	}
	u, err := url.Parse(raw)
	if err != nil {
		// A *url.Error's text repeats the whole URL.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return location{}, fmt.Errorf("URL %s: %w", redact(raw), err)
	}
	if u.Scheme == "file" {
		if u.Host != "" && u.Host != "localhost" {
			return location{}, fmt.Errorf("URL %s: file URLs take no host (use file:///abs/path)", redact(raw))
		}
		return fileLocation(u.Path)
	}
	q := ""
	if u.RawQuery != "" {
		q = "?" + u.RawQuery
	}
	return location{
		scheme:    u.Scheme,
		bucketURL: u.Scheme + "://" + u.Host + q,
		key:       strings.TrimPrefix(u.Path, "/"),
		shown:     u.Scheme + "://" + u.Host,
		query:     u.RawQuery,
	}, nil
}

// fileLocation roots a local bucket at the file system root, so that every
// local path shares one bucket and keys are absolute paths without the
// leading slash.
func fileLocation(p string) (location, error) {
	if !strings.HasPrefix(p, "/") {
		return location{}, fmt.Errorf("file path %s is not absolute", p)
	}
	root := "/"
	return location{scheme: "file", bucketURL: "file:///", root: root, key: strings.TrimPrefix(p, "/")}, nil
}

func hasMeta(key string) bool { return strings.ContainsAny(key, "*?[") }

// isDir reports whether a local location names a directory.
func isDir(loc location) bool {
	st, err := os.Stat(filepath.FromSlash(path.Join(loc.root, loc.key)))
	return err == nil && st.IsDir()
}

// globRoot is the longest directory prefix of a pattern free of glob
// metacharacters: the prefix to list.
func globRoot(pattern string) string {
	i := strings.IndexAny(pattern, "*?[")
	j := strings.LastIndex(pattern[:i], "/")
	return pattern[:j+1]
}

func hiddenPath(rel string) bool {
	for part := range strings.SplitSeq(rel, "/") {
		if strings.HasPrefix(part, ".") || strings.HasPrefix(part, "_") {
			return true
		}
	}
	return false
}

// redact drops the query and the user information of a URL, where
// credentials and signatures live. A plain path has neither: a '?' in it is a
// glob.
func redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest = rest[:i] + "?…"
	}
	authority, _, _ := strings.Cut(rest, "/")
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		rest = "…@" + rest[i+1:]
	}
	return scheme + "://" + rest
}

// scrub hides a URL's query in the text of err, which came from code that
// saw the whole URL (a bucket opener, a driver). errors.Is and errors.As still
// see the original error, but its text is not in the chain that printing
// walks.
func scrub(err error, rawQuery string) error {
	if err == nil || rawQuery == "" {
		return err
	}
	msg := err.Error()
	secrets := []string{rawQuery}
	if q, perr := url.ParseQuery(rawQuery); perr == nil {
		for k, vs := range q {
			if publicQueryKeys[k] {
				continue
			}
			for _, v := range vs {
				if len(v) >= 4 { // shorter values are flags and numbers, not secrets
					secrets = append(secrets, v, url.QueryEscape(v))
				}
			}
		}
	}
	if u, uerr := url.QueryUnescape(rawQuery); uerr == nil {
		secrets = append(secrets, u)
	}
	clean := msg
	for _, s := range secrets {
		clean = strings.ReplaceAll(clean, s, "…")
	}
	if clean == msg {
		return err
	}
	return &scrubbedError{msg: clean, err: err}
}

// publicQueryKeys are the drivers' query options that never carry a secret;
// their values stay readable in errors (an endpoint with user info is still
// scrubbed, as the whole query is).
var publicQueryKeys = map[string]bool{
	"region": true, "use_path_style": true, "s3ForcePathStyle": true, "disable_https": true,
	"domain": true, "protocol": true, "localemu": true, "cdn": true, "storage_account": true,
	"anonymous": true, "dualstack": true, "fips": true, "accelerate": true, "hostname_immutable": true,
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string        { return e.msg }
func (e *scrubbedError) Is(target error) bool { return errors.Is(e.err, target) }
func (e *scrubbedError) As(target any) bool   { return errors.As(e.err, target) }

// blobBucket adapts a gocloud.dev/blob bucket to Bucket. Its errors are
// scrubbed of the bucket URL's query.
type blobBucket struct {
	b      *blob.Bucket
	scheme string
	query  string
	// drv is the driver registered for the scheme, if any: how versions
	// are named and reads pinned to one (pinned.go).
	drv Driver
}

func (b *blobBucket) Scheme() string { return b.scheme }
func (b *blobBucket) Close() error   { return b.b.Close() }

func (b *blobBucket) List(ctx context.Context, prefix string) ([]Object, error) {
	var out []Object
	var token = blob.FirstPageToken
	for {
		page, next, err := b.b.ListPage(ctx, token, 1000, &blob.ListOptions{Prefix: prefix})
		if err != nil {
			return nil, scrub(notFound(err), b.query)
		}
		for _, o := range page {
			if o.IsDir {
				continue
			}
			obj := Object{Key: o.Key, Size: o.Size, ModTime: o.ModTime, Version: b.version(o.As)}
			if b.scheme == "file" {
				followLink(&obj, o.As)
			}
			out = append(out, obj)
		}
		if len(next) == 0 {
			break
		}
		token = next
	}
	slices.SortFunc(out, func(a, b Object) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func (b *blobBucket) Stat(ctx context.Context, key string) (Object, error) {
	a, err := b.b.Attributes(ctx, key)
	if err != nil {
		return Object{}, scrub(notFound(err), b.query)
	}
	return Object{Key: key, Size: a.Size, ModTime: a.ModTime, ETag: a.ETag, Version: b.version(a.As)}, nil
}

func (b *blobBucket) ReadAt(ctx context.Context, obj Object, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	pin := b.pin(ctx, obj)
	r, err := b.b.NewRangeReader(pin.ctx, obj.Key, off, int64(len(p)), pin.opts)
	if pin.changed != nil {
		return 0, pin.changed
	}
	if err != nil {
		if preconditionFailed(err) {
			return 0, b.changedSince(ctx, obj)
		}
		return 0, scrub(notFound(err), b.query)
	}
	defer r.Close()
	if v := b.version(r.As); !sameVersion(v, obj.Version) {
		// The store ignored the condition (or takes none): the answer is
		// still of one version, and it is not the one planned.
		return 0, &ChangedError{Planned: obj, Found: Object{Key: obj.Key, Size: r.Size(), ModTime: r.ModTime(), Version: v}, what: b.versionName()}
	}
	n, err := io.ReadFull(r, p)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if changed := pin.after(); changed != nil {
		return 0, changed // also where the read came up short: a file cut while read
	}
	return n, scrub(err, b.query)
}

func notFound(err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound || errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

// Reader reads one object through its bucket. It implements io.ReaderAt and
// io.ReadSeeker (over the object's known size), as Parquet readers expect.
type Reader struct {
	ctx context.Context
	src Source
	pos int64
}

// Size is the object's size in bytes.
func (r *Reader) Size() int64 { return r.src.Object.Size }

// WithContext returns a reader of the same object whose reads use ctx.
func (r *Reader) WithContext(ctx context.Context) *Reader {
	return &Reader{ctx: ctx, src: r.src}
}

// ReadAt reads len(p) bytes at off. Reading past the end returns io.EOF like
// an *os.File.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset %d", r.src.URL, off)
	}
	if len(p) == 0 {
		return 0, nil // like *os.File: nothing asked, nothing wrong
	}
	if err := r.ctx.Err(); err != nil {
		// Not every backend checks (fileblob does not), and a canceled read
		// must not run to the end.
		return 0, fmt.Errorf("read %s at %d: %w", r.src.URL, off, context.Cause(r.ctx))
	}
	size := r.src.Object.Size
	if off >= size {
		return 0, io.EOF
	}
	want := p
	short := false
	if off+int64(len(p)) > size {
		want = p[:size-off]
		short = true
	}
	n, err := r.src.Bucket.ReadAt(r.ctx, r.src.Object, want, off)
	if err != nil {
		return n, fmt.Errorf("read %s at %d+%d: %w", r.src.URL, off, len(want), err)
	}
	if short {
		return n, io.EOF
	}
	return n, nil
}

// Read reads from the current position.
func (r *Reader) Read(p []byte) (int, error) {
	n, err := r.ReadAt(p, r.pos)
	r.pos += int64(n)
	return n, err
}

// Seek moves the position used by Read.
func (r *Reader) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = r.pos + offset
	case io.SeekEnd:
		abs = r.src.Object.Size + offset
	default:
		return 0, fmt.Errorf("%s: bad whence %d", r.src.URL, whence)
	}
	if abs < 0 {
		return 0, fmt.Errorf("%s: seek to negative offset %d", r.src.URL, abs)
	}
	r.pos = abs
	return abs, nil
}

// limited bounds the requests in flight to a bucket (Options.MaxRequests).
type limited struct {
	Bucket
	slots chan struct{}
}

func (l *limited) acquire(ctx context.Context) error {
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *limited) release() { <-l.slots }

func (l *limited) ReadAt(ctx context.Context, obj Object, p []byte, off int64) (int, error) {
	if err := l.acquire(ctx); err != nil {
		return 0, err
	}
	defer l.release()
	return l.Bucket.ReadAt(ctx, obj, p, off)
}

func (l *limited) List(ctx context.Context, prefix string) ([]Object, error) {
	if err := l.acquire(ctx); err != nil {
		return nil, err
	}
	defer l.release()
	return l.Bucket.List(ctx, prefix)
}

func (l *limited) Stat(ctx context.Context, key string) (Object, error) {
	if err := l.acquire(ctx); err != nil {
		return Object{}, err
	}
	defer l.release()
	return l.Bucket.Stat(ctx, key)
}
