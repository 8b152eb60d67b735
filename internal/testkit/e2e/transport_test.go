package e2e_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"go.uber.org/goleak"
	gcaws "gocloud.dev/aws"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"

	"github.com/sluicedata/sluice/internal/testkit/scratch"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// The drivers that bucket URLs open keep their HTTP connections in pools
// out of reach, for up to 90 s after Close. A program that must have them
// gone at Close opens its buckets itself, over a transport it owns, through
// Options.Storage.Open; this is that recipe for S3, and its proof: once the
// transport's idle connections are closed, no goroutine of the stream or
// of the client is left.
func TestOwnTransport(t *testing.T) {
	sc := newScratch(t, scratch.S3)
	ctx := context.Background()
	spec := synth.Spec{Files: 2, RowsPerFile: 3000, RowGroupRows: 500, Seed: 13}
	if err := synth.WriteBucket(ctx, sc.Bucket, sc.Key+"data/", spec); err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()

	tr := http.DefaultTransport.(*http.Transport).Clone()
	o := stream.Options{URLs: []string{sc.URL("data/")}, Shuffle: true, Seed: 3, Allocator: checkedAllocator(t)}
	o.Storage.Open = s3Opener(tr)
	ds, err := stream.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for b, err := range ds.Batches(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		rows += b.NumRows()
	}
	if rows != spec.Rows() {
		t.Errorf("%d rows, want %d", rows, spec.Rows())
	}
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()
	goleak.VerifyNone(t, before)
}

// s3Opener opens the test server's s3:// bucket URLs over tr (nil: Go's
// default transport).
func s3Opener(tr http.RoundTripper) storage.Opener {
	return func(ctx context.Context, bucketURL string) (*blob.Bucket, error) {
		u, err := url.Parse(bucketURL)
		if err != nil {
			return nil, err
		}
		// The test URL's two S3-specific parameters; the rest (endpoint,
		// region) are gocloud's common AWS ones.
		q := u.Query()
		q.Del("use_path_style")
		q.Del("disable_https")
		cfg, err := gcaws.V2ConfigFromURLParams(ctx, q)
		if err != nil {
			return nil, err
		}
		cfg.HTTPClient = &http.Client{Transport: tr}
		client := s3.NewFromConfig(cfg, func(o *s3.Options) {
			o.UsePathStyle = true
			o.EndpointOptions.DisableHTTPS = true
		})
		return s3blob.OpenBucket(ctx, client, u.Host, nil)
	}
}

// A shuffled epoch of small row groups makes many requests, many at once;
// bounded by Options.Storage.MaxRequests, they take turns on about as many
// connections as the bound (given an idle pool that large), instead of
// dialling one for most requests (64 to 82 connections for 86 requests when
// unbounded, 18 to 20 with a bound of 16). The default bound (64) is no
// fewer than these requests; its pool is the drivers' (ReuseConnections in
// storage/s3, storage/gcs and storage/azure).
func TestConnectionsReused(t *testing.T) {
	sc := newScratch(t, scratch.S3)
	ctx := context.Background()
	spec := synth.Spec{Files: 4, RowsPerFile: 5000, RowGroupRows: 100, Seed: 17}
	if err := synth.WriteBucket(ctx, sc.Bucket, sc.Key+"data/", spec); err != nil {
		t.Fatal(err)
	}
	for _, bound := range []int{16, -1} {
		var dials atomic.Int64
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 16
		dial := tr.DialContext
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dial(ctx, network, addr)
		}
		o := stream.Options{URLs: []string{sc.URL("data/")}, Shuffle: true, Seed: 5, ShuffleWindow: 4000, Allocator: checkedAllocator(t)}
		o.Storage.Open, o.Storage.MaxRequests = s3Opener(tr), bound
		ds, err := stream.Open(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range ds.Batches(ctx) {
			if err != nil {
				t.Fatal(err)
			}
		}
		reqs := ds.Metrics().Snapshot().ReadRequests
		ds.Close()
		tr.CloseIdleConnections()
		t.Logf("MaxRequests %d: %d requests over %d connections", bound, reqs, dials.Load())
		// A few more than the bound: a finished request frees its slot
		// before the transport has its connection back in the idle pool.
		if bound == 16 && dials.Load() > 2*16 {
			t.Errorf("MaxRequests 16: %d connections for %d requests, want at most 32", dials.Load(), reqs)
		}
	}
}
