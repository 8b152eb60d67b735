package storage

import (
	"github.com/sluicedata/sluice/internal/bucketurl"
)

// ErrNoDriver is wrapped when a URL's scheme has no driver linked into the
// program.
var ErrNoDriver = bucketurl.ErrNoDriver

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
}

// Register makes a driver known to every Resolver and to
// checkpoint.OpenBucketStoreURL. Drivers call it from init. It panics if the
// scheme is registered already.
func Register(d Driver) {
	bucketurl.Register(bucketurl.Driver{Scheme: d.Scheme, Open: d.Open, HTTPStatus: d.HTTPStatus})
}
