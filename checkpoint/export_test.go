package checkpoint

import "gocloud.dev/blob"

// What the tests in package checkpoint_test reach past the API for. They
// are outside the package so that they can run internal/storetest, which
// imports this package.

// NewBucketBackend returns the backend a BucketStore keeps its objects in,
// over b, which stays the caller's to close.
func NewBucketBackend(b *blob.Bucket) Backend { return bucketBackend{bucket: b} }

// BucketInternals returns the backend and layout under s, and whether s
// closes its bucket on Close.
func BucketInternals(s *BucketStore) (Backend, Layout, bool) {
	return s.b, s.keys, s.b.(bucketBackend).owned
}
