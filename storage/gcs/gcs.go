// Package gcs links the Google Cloud Storage backend into sluice: importing
// it for its side effect, as gocloud.dev/blob/gcsblob is imported,
//
//	import _ "github.com/sluicedata/sluice/storage/gcs"
//
// opens gs:// URLs in stream.Options.URLs, checkpoint.OpenBucketStoreURL and
// the formats, and lets retries tell a refusal from a server fault.
//
// gs://BUCKET/PREFIX
//
// Credentials are Application Default Credentials
// (GOOGLE_APPLICATION_CREDENTIALS, gcloud's, or the metadata server).
// STORAGE_EMULATOR_HOST=host:port (no scheme: the driver prepends http://)
// sends every request to an emulator such as fake-gcs-server,
// unauthenticated. Without credentials, opening fails with an error that
// says so, unless anonymous=true (for public buckets). Query parameters:
// anonymous=true, access_id, private_key_path (both for signed URLs only),
// universe_domain, grpc=true. The query reaches gocloud's opener as it is;
// sluice never shows it in an error.
package gcs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"

	gstorage "cloud.google.com/go/storage"
	"gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/gcp"
	"google.golang.org/api/googleapi"

	"github.com/sluicedata/sluice/storage"
)

func init() {
	storage.Register(storage.Driver{
		Scheme:      gcsblob.Scheme,
		Open:        open,
		HTTPStatus:  httpStatus,
		HTTPHeader:  httpHeader,
		Version:     version,
		VersionName: "generation",
		PrepareRead: prepareRead,
	})
}

// version is an object's generation, as a listing, its attributes or a
// reader give it: GCS numbers every write of an object anew, where its
// ETag also changes with the metadata.
func version(as func(any) bool) string {
	var a gstorage.ObjectAttrs
	if as(&a) && a.Generation != 0 {
		return strconv.FormatInt(a.Generation, 10)
	}
	var r *gstorage.Reader
	if as(&r) && r != nil && r.Attrs.Generation != 0 {
		return strconv.FormatInt(r.Attrs.Generation, 10)
	}
	return ""
}

// prepareRead reads on condition that the object is still of the planned
// generation (GCS answers 412 where it is not), and turns the client's
// retries off, which would otherwise retry each of sluice's attempts.
func prepareRead(ctx context.Context, generation string) (context.Context, func(as func(any) bool) error) {
	gen, _ := strconv.ParseInt(generation, 10, 64)
	return ctx, func(as func(any) bool) error {
		var obj **gstorage.ObjectHandle
		if !as(&obj) {
			return nil
		}
		h := (*obj).Retryer(gstorage.WithPolicy(gstorage.RetryNever))
		if gen != 0 {
			h = h.If(gstorage.Conditions{GenerationMatch: gen})
		}
		*obj = h
		return nil
	}
}

func httpHeader(err error) http.Header {
	var g *googleapi.Error
	if errors.As(err, &g) {
		return g.Header
	}
	return nil
}

// open goes around gocloud's default GCS opener where that one would look
// for Google credentials and not find them: it prints a warning to standard
// output (into the rows `sluice cat` writes there) and then fails at the
// first request with an error about parsing a private key. A URL with
// anonymous=true gets an unauthenticated client without the search; a URL
// without finds no credentials and fails here, saying what to do. An
// emulator needs no credentials, so gocloud's opener serves it as it is.
func open(ctx context.Context, bucketURL string) (*blob.Bucket, error) {
	u, err := url.Parse(bucketURL)
	if err != nil || os.Getenv("STORAGE_EMULATOR_HOST") != "" || os.Getenv("STORAGE_EMULATOR_HOST_GRPC") != "" {
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

func httpStatus(err error) int {
	var g *googleapi.Error
	if errors.As(err, &g) {
		return g.Code
	}
	return 0
}
