// Package bucketurl opens gocloud.dev bucket URLs for formats/storage and
// checkpoint, through the cloud drivers a program links. It holds the
// registry behind storage.Register, here rather than in formats/storage so
// that checkpoint sees the same drivers without importing the formats.
//
// It imports no cloud SDK: a program links only the backends it imports
// (formats/storage/s3, gcs, azure), as with gocloud.dev's own driver packages.
package bucketurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// and mem:// are always there, for checkpoint
	_ "gocloud.dev/blob/memblob"  // as for formats/storage
)

// Driver is what sluice knows of one URL scheme beyond gocloud's opener.
type Driver struct {
	Scheme string
	// Open opens a bucket URL of the scheme; nil means blob.OpenBucket,
	// i.e. the gocloud URL opener the driver's package links.
	Open func(ctx context.Context, bucketURL string) (*blob.Bucket, error)
	// HTTPStatus is the HTTP status of the response an error of the
	// backend's SDK carries, 0 if it carries none. May be nil.
	HTTPStatus func(error) int
}

// ErrNoDriver is wrapped when a URL's scheme has no driver linked into the
// program.
var ErrNoDriver = errors.New("no driver linked")

// Packages are the driver packages of sluice's own cloud backends, by scheme,
// for the error that says which one to import.
var Packages = map[string]string{
	"s3":     "github.com/sluicedata/sluice/formats/storage/s3",
	"gs":     "github.com/sluicedata/sluice/formats/storage/gcs",
	"azblob": "github.com/sluicedata/sluice/formats/storage/azure",
}

var (
	mu      sync.RWMutex
	drivers = map[string]Driver{}
	// statuses are the drivers' HTTPStatus functions in registration
	// order, so that classifying an error does not walk a map.
	statuses []func(error) int
)

// Register adds a driver. It panics if the scheme has one already: two
// packages claiming one scheme is a mistake in what the program links, as
// with database/sql.Register.
func Register(d Driver) {
	if d.Scheme == "" {
		panic("bucketurl: Register with an empty scheme")
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := drivers[d.Scheme]; dup {
		panic(fmt.Sprintf("bucketurl: Register called twice for scheme %q", d.Scheme))
	}
	drivers[d.Scheme] = d
	if d.HTTPStatus != nil {
		statuses = append(statuses, d.HTTPStatus)
	}
}

// Registered reports whether a driver for scheme is registered.
func Registered(scheme string) bool {
	mu.RLock()
	defer mu.RUnlock()
	_, ok := drivers[scheme]
	return ok
}

// Open opens a bucket URL with the driver registered for its scheme. A scheme
// with none goes to gocloud's URL mux (file://, mem://, and whatever other
// gocloud driver the program links itself), except that one of sluice's
// cloud schemes whose gocloud opener is not linked either fails at once,
// naming the package to import: gocloud's own error lists the schemes it
// knows, which does not say what to do.
func Open(ctx context.Context, bucketURL string) (*blob.Bucket, error) {
	u, err := url.Parse(bucketURL)
	if err != nil {
		return blob.OpenBucket(ctx, bucketURL) // gocloud says what is wrong with it
	}
	mu.RLock()
	d, ok := drivers[u.Scheme]
	mu.RUnlock()
	switch {
	case ok && d.Open != nil:
		return d.Open(ctx, bucketURL)
	case !ok && Packages[u.Scheme] != "" && !blob.DefaultURLMux().ValidBucketScheme(u.Scheme):
		return nil, fmt.Errorf("%w for %s:// URLs: import _ %q", ErrNoDriver, u.Scheme, Packages[u.Scheme])
	}
	return blob.OpenBucket(ctx, bucketURL)
}

// HTTPStatus is the HTTP status of the response err carries, as the
// registered drivers read it from their SDKs' error types; 0 if none does.
func HTTPStatus(err error) int {
	mu.RLock()
	defer mu.RUnlock()
	for _, status := range statuses {
		if s := status(err); s != 0 {
			return s
		}
	}
	return 0
}
