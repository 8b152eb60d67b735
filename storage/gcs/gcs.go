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
	"strings"

	gstorage "cloud.google.com/go/storage"
	"gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/gcp"
	"golang.org/x/oauth2/google"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/internal/httppool"
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

// open builds the client itself rather than through gocloud's default
// opener, which uses http.DefaultTransport's small idle pool (see
// httppool.IdleConnsPerHost) and, where it finds no Google credentials, prints a
// warning to standard output (into the rows `sluice cat` writes there) and
// then fails at the first request with an error about parsing a private key.
// A URL with anonymous=true (or access_id=-) gets an unauthenticated client
// without the search; a URL without finds no credentials and fails here,
// saying what to do. An emulator needs no credentials. gocloud's opener also
// reads a signing identity (private key or the GCE service account) for
// SignedURL, which sluice never calls: that is left out. grpc=true and
// zonal=true go to gocloud's opener, as their gRPC clients use no HTTP
// transport.
func open(ctx context.Context, bucketURL string) (*blob.Bucket, error) {
	u, err := url.Parse(bucketURL)
	if err != nil {
		return blob.OpenBucket(ctx, bucketURL)
	}
	q := u.Query()
	grpc, _ := strconv.ParseBool(q.Get("grpc"))
	zonal, _ := strconv.ParseBool(q.Get("zonal"))
	emulator := os.Getenv("STORAGE_EMULATOR_HOST")
	if grpc || zonal || os.Getenv("STORAGE_EMULATOR_HOST_GRPC") != "" && emulator == "" {
		return blob.OpenBucket(ctx, bucketURL)
	}
	anon, _ := strconv.ParseBool(q.Get("anonymous"))
	anon = anon || q.Get("access_id") == "-"
	if anon || emulator != "" {
		// gocloud's URLOpener swaps the client for one over
		// http.DefaultTransport when it sees these; the client below is
		// already unauthenticated.
		q.Del("anonymous")
		if q.Get("access_id") == "-" {
			q.Del("access_id")
		}
		u.RawQuery = q.Encode()
	}
	switch {
	case emulator != "":
		// gocloud's bucket talks to an emulator through http.DefaultClient
		// whatever client it is given, so the storage client is built here.
		// Closing the bucket leaves it open; over HTTP it holds nothing but
		// the shared transport.
		endpoint := emulator
		if !strings.Contains(endpoint, "://") {
			endpoint = "http://" + endpoint
		}
		c, err := gstorage.NewClient(ctx, option.WithoutAuthentication(),
			option.WithEndpoint(strings.TrimSuffix(endpoint, "/")+"/storage/v1/"),
			option.WithHTTPClient(&http.Client{Transport: httppool.Transport()}))
		if err != nil {
			return nil, err
		}
		opener := &gcsblob.URLOpener{Options: gcsblob.Options{Client: c}}
		return opener.OpenBucketURL(ctx, u)
	case anon:
		opener := &gcsblob.URLOpener{Client: gcp.NewAnonymousHTTPClient(httppool.Transport())}
		return opener.OpenBucketURL(ctx, u)
	}
	var creds *google.Credentials
	if ud := q.Get("universe_domain"); ud != "" {
		creds, err = gcp.DefaultCredentialsWithParams(ctx, google.CredentialsParams{UniverseDomain: ud})
	} else {
		creds, err = gcp.DefaultCredentials(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("no Google credentials: set GOOGLE_APPLICATION_CREDENTIALS, run `gcloud auth application-default login`, "+
			"or add anonymous=true to the URL's query to read a public bucket: %w", err)
	}
	var opts gcsblob.Options
	// As gocloud's opener does, a universe domain the credentials cannot
	// tell leaves the client's default (googleapis.com).
	if ud, err := creds.GetUniverseDomain(); err == nil && ud != "" {
		opts.ClientOptions = append(opts.ClientOptions, option.WithUniverseDomain(ud))
	}
	client, err := gcp.NewHTTPClient(httppool.Transport(), creds.TokenSource)
	if err != nil {
		return nil, err
	}
	opener := &gcsblob.URLOpener{Client: client, Options: opts}
	return opener.OpenBucketURL(ctx, u)
}

func httpStatus(err error) int {
	var g *googleapi.Error
	if errors.As(err, &g) {
		return g.Code
	}
	return 0
}
