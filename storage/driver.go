package storage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"gocloud.dev/blob"
)

// ErrNoDriver is wrapped when a URL's scheme has no driver linked into the
// program.
var ErrNoDriver = errors.New("no driver linked")

// Driver is what a backend's package registers.
type Driver struct {
	// Scheme is the URL scheme the driver serves ("s3").
	Scheme string
	// Open opens a bucket URL of the scheme (scheme, bucket and query, no
	// key). Nil: blob.OpenBucket, that is the gocloud.dev URL opener the
	// driver's package links.
	Open Opener
	// HTTPStatus returns the HTTP status of the response that an error of
	// the backend's SDK carries, 0 if it carries none. Transient needs it
	// where gocloud's error code does not tell: gocloud calls a wrong
	// signature or an expired token Unknown, which would be retried. May
	// be nil.
	HTTPStatus func(error) int
	// HTTPHeader returns the header of the response that an error of the
	// backend's SDK carries, nil if it carries none: a throttled request
	// is retried no sooner than its Retry-After says. May be nil.
	HTTPHeader func(error) http.Header
	// Permanent reports an error of the backend's SDK that no retry can
	// mend although it carries no HTTP status: Azure's SDK marks a
	// credential that gives no token, or a token it will not send over
	// plain HTTP, so. Without it, gocloud calls such errors Unknown and
	// each read would be retried RetryPolicy.MaxAttempts times before the
	// error shows. May be nil.
	Permanent func(error) bool

	// Version reads an object's version, the one reads are pinned to
	// (Object.Version), through the As of what the backend's gocloud
	// driver gives for a listed object, an object's attributes and a
	// range reader: the three kinds it may be handed. "" where it finds
	// none. Nil: the backend's reads are not pinned.
	Version func(as func(any) bool) string
	// VersionName says what Version is, for errors: "ETag", "generation".
	VersionName string
	// PrepareRead readies one range read of an object: it returns the
	// context to read with and gocloud's ReaderOptions.BeforeRead, which
	// sets on the backend's request the condition that the object is
	// still of version (Object.Version; "" for no condition), so that the
	// store answers 412 Precondition Failed where it is not, and turns the
	// SDK's own retries off: the Resolver's RetryPolicy retries reads,
	// once, with one bound. May be nil.
	PrepareRead func(ctx context.Context, version string) (context.Context, func(as func(any) bool) error)
}

// driverPackages are the driver packages of sluice's own cloud backends, by
// scheme, for the error that says which one to import.
var driverPackages = map[string]string{
	"s3":     "github.com/sluicedata/sluice/storage/s3",
	"gs":     "github.com/sluicedata/sluice/storage/gcs",
	"azblob": "github.com/sluicedata/sluice/storage/azure",
}

// The registry is process-wide, as database/sql's is: drivers register from
// init, before any Resolver or checkpoint store exists to be handed them.
var (
	driversMu sync.RWMutex
	drivers   = map[string]Driver{}
	// statuses are the drivers' HTTPStatus functions in registration
	// order, so that classifying an error does not walk a map.
	statuses   []func(error) int
	headers    []func(error) http.Header
	permanents []func(error) bool
)

// Register makes a driver known to every Resolver, to OpenBucket and so to
// checkpoint.OpenBucketStoreURL. Drivers call it from init. It panics if the
// scheme has one already: two packages claiming one scheme is a mistake in
// what the program links, as with database/sql.Register.
func Register(d Driver) {
	if d.Scheme == "" {
		panic("storage: Register with an empty scheme")
	}
	driversMu.Lock()
	defer driversMu.Unlock()
	if _, dup := drivers[d.Scheme]; dup {
		panic(fmt.Sprintf("storage: Register called twice for scheme %q", d.Scheme))
	}
	drivers[d.Scheme] = d
	if d.HTTPStatus != nil {
		statuses = append(statuses, d.HTTPStatus)
	}
	if d.HTTPHeader != nil {
		headers = append(headers, d.HTTPHeader)
	}
	if d.Permanent != nil {
		permanents = append(permanents, d.Permanent)
	}
}

// driverFor is the driver registered for scheme, or the zero Driver.
func driverFor(scheme string) Driver {
	driversMu.RLock()
	defer driversMu.RUnlock()
	return drivers[scheme]
}

// registered reports whether a driver for scheme is registered.
func registered(scheme string) bool {
	driversMu.RLock()
	defer driversMu.RUnlock()
	_, ok := drivers[scheme]
	return ok
}

// OpenBucket opens a bucket URL (scheme, bucket and query, no key) with the
// driver registered for its scheme. A scheme with none goes to gocloud's URL
// mux (file://, mem://, and whatever other gocloud driver the program links
// itself), except that one of sluice's cloud schemes whose gocloud opener is
// not linked either fails at once, wrapping ErrNoDriver and naming the
// package to import: gocloud's own error lists the schemes it knows, which
// does not say what to do.
//
// It is the opening a Resolver does by default, for callers that want the
// gocloud bucket itself, as checkpoint's bucket store does. The error may
// show the URL's query; callers redact it.
func OpenBucket(ctx context.Context, bucketURL string) (*blob.Bucket, error) {
	u, err := url.Parse(bucketURL)
	if err != nil {
		return blob.OpenBucket(ctx, bucketURL) // gocloud says what is wrong with it
	}
	driversMu.RLock()
	d, ok := drivers[u.Scheme]
	driversMu.RUnlock()
	switch {
	case ok && d.Open != nil:
		return d.Open(ctx, bucketURL)
	case !ok && driverPackages[u.Scheme] != "" && !blob.DefaultURLMux().ValidBucketScheme(u.Scheme):
		return nil, fmt.Errorf("%w for %s:// URLs: import _ %q", ErrNoDriver, u.Scheme, driverPackages[u.Scheme])
	}
	return blob.OpenBucket(ctx, bucketURL)
}

// httpStatus is the HTTP status of the response err carries, as the
// registered drivers read it from their SDKs' error types (Driver.HTTPStatus);
// 0 if none does.
func httpStatus(err error) int {
	driversMu.RLock()
	defer driversMu.RUnlock()
	for _, status := range statuses {
		if s := status(err); s != 0 {
			return s
		}
	}
	return 0
}

// httpHeader is the header of the response err carries, as the registered
// drivers read it (Driver.HTTPHeader); nil if none does.
func httpHeader(err error) http.Header {
	driversMu.RLock()
	defer driversMu.RUnlock()
	for _, header := range headers {
		if h := header(err); h != nil {
			return h
		}
	}
	return nil
}

// permanent reports whether a registered driver knows err for one that no
// retry can mend (Driver.Permanent).
func permanent(err error) bool {
	driversMu.RLock()
	defer driversMu.RUnlock()
	for _, p := range permanents {
		if p(err) {
			return true
		}
	}
	return false
}
