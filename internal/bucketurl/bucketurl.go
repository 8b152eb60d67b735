// Package bucketurl opens gocloud.dev bucket URLs for formats/storage and
// checkpoint, going around the one driver behaviour sluice cannot accept
// (see Open).
package bucketurl

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"

	"gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/gcp"
)

// Open opens a bucket URL with the drivers the program links. gs:// without an
// emulator goes around gocloud's default GCS opener where that one would
// look for Google credentials and not find them: it prints a warning to
// standard output (into the rows `sluice cat` writes there) and then fails
// at the first request with an error about parsing a private key. A URL
// with anonymous=true gets an unauthenticated client without the search; a
// URL without finds no credentials and fails here, saying what to do.
func Open(ctx context.Context, bucketURL string) (*blob.Bucket, error) {
	u, err := url.Parse(bucketURL)
	if err != nil || u.Scheme != gcsblob.Scheme || os.Getenv("STORAGE_EMULATOR_HOST") != "" || os.Getenv("STORAGE_EMULATOR_HOST_GRPC") != "" {
		return blob.OpenBucket(ctx, bucketURL)
	}
	q := u.Query()
	if anon, _ := strconv.ParseBool(q.Get("anonymous")); anon || q.Get("access_id") == "-" {
		opener := &gcsblob.URLOpener{Client: gcp.NewAnonymousHTTPClient(gcp.DefaultTransport())}
		return opener.OpenBucketURL(ctx, u)
	}
	if _, err := gcp.DefaultCredentials(ctx); err != nil {
		return nil, fmt.Errorf("no Google credentials: set GOOGLE_APPLICATION_CREDENTIALS, run `gcloud auth application-default login`, "+
			"or add anonymous=true to the URL's query to read a public bucket: %w", err)
	}
	return blob.OpenBucket(ctx, bucketURL)
}
