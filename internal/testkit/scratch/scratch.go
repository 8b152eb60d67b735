// Package scratch gives tests and benchmarks a fresh prefix in an
// object-store bucket named by the environment: the variables that
// `scripts/objectstores.sh start` prints for its local servers (versitygw,
// fake-gcs-server, Azurite), or real buckets. The bucket is created if
// missing; the prefix is deleted with everything under it on Close.
package scratch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"testing"
	"time"

	gcs "cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"

	// The tests and the bench that take their buckets from here open them by
	// URL, through sluice's drivers.
	_ "github.com/sluicedata/sluice/storage/azure"
	_ "github.com/sluicedata/sluice/storage/gcs"
	_ "github.com/sluicedata/sluice/storage/s3"
)

// Setup is the command, run from the repository root, that starts the local
// servers and sets the variables.
const Setup = `eval "$(bash scripts/objectstores.sh start)"`

// Backend is an object store whose bucket URL (with the driver's query) is
// in an environment variable.
type Backend struct {
	Name   string // for messages: S3, GCS, Azure
	Env    string // the variable holding the bucket URL
	create func(ctx context.Context, b *blob.Bucket, name string) error
}

var (
	S3       = Backend{"S3", "SLUICE_TEST_S3_URL", createS3Bucket}
	GCS      = Backend{"GCS", "SLUICE_TEST_GCS_URL", createGCSBucket}
	Azure    = Backend{"Azure", "SLUICE_TEST_AZURE_URL", createAzureContainer}
	Backends = []Backend{S3, GCS, Azure}
)

// URL is the backend's bucket URL, or "" when its variable is unset.
func (be Backend) URL() string {
	// Read so that go test caches a result only for as long as the servers
	// that produced it run: scripts/objectstores.sh changes it on each start.
	_ = os.Getenv("SLUICE_OBJECTSTORES_STARTED")
	return os.Getenv(be.Env)
}

// Missing says that the backend's variable is unset and how to set it.
func (be Backend) Missing() string {
	return fmt.Sprintf("%s server not running (%s is unset): from the repository root run `%s`, "+
		"or use the README's test command, `bash .ci/run`", be.Name, be.Env, Setup)
}

// Prefix is a fresh prefix in a backend's bucket.
type Prefix struct {
	Bucket *blob.Bucket
	// Key is the prefix, ending in a slash: PURPOSE/RANDOM/.
	Key       string
	bucketURL string
	backend   Backend
}

// New opens the backend's bucket (creating it if it does not exist) and
// picks a fresh prefix under purpose.
func New(ctx context.Context, be Backend, purpose string) (*Prefix, error) {
	raw := be.URL()
	if raw == "" {
		return nil, errors.New(be.Missing())
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %s is not a URL", be.Name, be.Env)
	}
	b, err := blob.OpenBucket(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("%s: open %s: %w", be.Name, withoutQuery(u), err)
	}
	if ok, _ := b.IsAccessible(ctx); !ok {
		if err := be.create(ctx, b, u.Host); err != nil {
			b.Close()
			return nil, fmt.Errorf("%s: create bucket %s: %w", be.Name, u.Host, err)
		}
	}
	var r [6]byte
	rand.Read(r[:])
	return &Prefix{Bucket: b, Key: purpose + "/" + hex.EncodeToString(r[:]) + "/", bucketURL: raw, backend: be}, nil
}

// ForTest is New for a test, which it skips where the backend's server is
// not running (fails under SLUICE_REQUIRE_OBJECTSTORES=1); the prefix is
// closed when the test ends.
func ForTest(tb testing.TB, be Backend, purpose string) *Prefix {
	tb.Helper()
	if be.URL() == "" {
		if os.Getenv("SLUICE_REQUIRE_OBJECTSTORES") == "1" {
			tb.Fatal(be.Missing() + " (SLUICE_REQUIRE_OBJECTSTORES=1 makes this an error)")
		}
		tb.Skip(be.Missing())
	}
	// A server named but not answering is retried by its SDK without end
	// (GCS's client backs off forever on a refused connection): bound it,
	// so that the test fails by name rather than at the test timeout.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sc, err := New(ctx, be, purpose)
	if err != nil {
		tb.Fatalf("%v (is the server at %s running? %s)", err, be.Env, Setup)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sc.Close(ctx); err != nil {
			tb.Errorf("%s: %v", be.Name, err)
		}
	})
	return sc
}

// URL names key under the prefix, keeping the bucket URL's query (the
// driver's options) so that it reaches the bucket opener.
func (p *Prefix) URL(key string) string {
	u, _ := url.Parse(p.bucketURL)
	u.Path = "/" + p.Key + key
	return u.String()
}

// Close deletes everything under the prefix and closes the bucket.
func (p *Prefix) Close(ctx context.Context) error {
	var errs []error
	it := p.Bucket.List(&blob.ListOptions{Prefix: p.Key})
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("clean up %s: %w", p.Key, err))
			break
		}
		if err := p.Bucket.Delete(ctx, o.Key); err != nil {
			errs = append(errs, fmt.Errorf("clean up %s: %w", o.Key, err))
		}
	}
	errs = append(errs, p.Bucket.Close())
	return errors.Join(errs...)
}

func withoutQuery(u *url.URL) string {
	c := *u
	c.RawQuery, c.User = "", nil
	return c.String()
}

func createS3Bucket(ctx context.Context, b *blob.Bucket, name string) error {
	var c *s3.Client
	if !b.As(&c) {
		return errors.New("not an s3blob bucket")
	}
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name})
	return err
}

func createGCSBucket(ctx context.Context, b *blob.Bucket, name string) error {
	var c *gcs.Client
	if !b.As(&c) {
		return errors.New("not a gcsblob bucket")
	}
	return c.Bucket(name).Create(ctx, "sluice-test", nil)
}

func createAzureContainer(ctx context.Context, b *blob.Bucket, _ string) error {
	var c *container.Client
	if !b.As(&c) {
		return errors.New("not an azureblob container")
	}
	_, err := c.Create(ctx, nil)
	return err
}
