package e2e_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"

	"github.com/sluicedata/sluice/internal/testkit/scratch"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// A wrong secret is a permanent failure: the server's refusal (403) fails
// Open at once, without the retries and backoff of a transient error, with
// an error that names the prefix and shows neither secret. S3 reads its
// secret from the environment when the bucket is opened; the Azure driver
// fixes its credential at the first URL a process opens, so the wrong key
// reaches Azure through Options.Storage.Open. GCS's emulator checks none.
func TestWrongCredentials(t *testing.T) {
	for _, c := range []struct {
		be  scratch.Backend
		env string
	}{{scratch.S3, "AWS_SECRET_ACCESS_KEY"}, {scratch.Azure, "AZURE_STORAGE_KEY"}} {
		t.Run(c.be.Name, func(t *testing.T) {
			sc := newScratch(t, c.be)
			ctx := context.Background()
			spec := synth.Spec{Files: 1, RowsPerFile: 100, RowGroupRows: 100, Seed: 1}
			if err := synth.WriteBucket(ctx, sc.Bucket, sc.Key+"data/", spec); err != nil {
				t.Fatal(err)
			}
			good := os.Getenv(c.env)
			var reqs requests
			o := stream.Options{URLs: []string{sc.URL("data/")}}
			o.Storage.Wrap = reqs.wrap
			var wrong string
			if c.be.Name == scratch.S3.Name {
				wrong = "wrong-" + good
				t.Setenv(c.env, wrong)
			} else {
				// A well-formed key (base64 of 64 bytes) that is not the account's.
				wrong = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 64))
				o.Storage.Open = func(ctx context.Context, bucketURL string) (*blob.Bucket, error) {
					return openAzureWithKey(ctx, bucketURL, wrong)
				}
			}

			start := time.Now()
			_, err := stream.Open(ctx, o)
			took := time.Since(start)
			if err == nil {
				t.Fatal("opening with a wrong secret succeeded")
			}
			t.Logf("after %v: %v", took.Round(time.Millisecond), err)
			if storage.Transient(err) || errors.Is(err, storage.ErrNotFound) {
				t.Errorf("a refused secret counts as transient or not found: %v", err)
			}
			// Counted, not timed: on a loaded machine one attempt can take
			// as long as six.
			reqs.checkOnce(t)
			if !strings.Contains(err.Error(), sc.Key) {
				t.Errorf("the error does not name the prefix %s: %v", sc.Key, err)
			}
			for _, secret := range []string{good, wrong} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error shows a secret: %v", err)
				}
			}
		})
	}
}

// openAzureWithKey opens an azblob:// bucket URL of the test server (its
// domain and protocol parameters) with a shared key of the caller's.
func openAzureWithKey(ctx context.Context, bucketURL, key string) (*blob.Bucket, error) {
	u, err := url.Parse(bucketURL)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	account := os.Getenv("AZURE_STORAGE_ACCOUNT")
	cred, err := azblob.NewSharedKeyCredential(account, key)
	if err != nil {
		return nil, err
	}
	containerURL := fmt.Sprintf("%s://%s/%s/%s", q.Get("protocol"), q.Get("domain"), account, u.Host)
	client, err := container.NewClientWithSharedKeyCredential(containerURL, cred, nil)
	if err != nil {
		return nil, err
	}
	return azureblob.OpenBucket(ctx, client, nil)
}

// A bucket that does not exist fails Open at once, as not found, with an
// error that names it.
func TestMissingBucket(t *testing.T) {
	for _, be := range scratch.Backends {
		t.Run(be.Name, func(t *testing.T) {
			newScratch(t, be) // skips or fails without the server
			u, err := url.Parse(be.URL())
			if err != nil {
				t.Fatal(err)
			}
			u.Host = "sluice-no-such-bucket"
			u.Path = "/data/"
			var reqs requests
			o := stream.Options{URLs: []string{u.String()}}
			o.Storage.Wrap = reqs.wrap
			start := time.Now()
			_, err = stream.Open(context.Background(), o)
			took := time.Since(start)
			if err == nil {
				t.Fatal("opening a missing bucket succeeded")
			}
			t.Logf("after %v: %v", took.Round(time.Millisecond), err)
			if storage.Transient(err) {
				t.Errorf("a missing bucket counts as transient: %v", err)
			}
			reqs.checkOnce(t)
			if !strings.Contains(err.Error(), "sluice-no-such-bucket") {
				t.Errorf("the error does not name the bucket: %v", err)
			}
		})
	}
}

// requests records every request made of the buckets it wraps. Retrying
// wraps what Options.Storage.Wrap returns, so each attempt of a retried
// request is recorded.
type requests struct {
	mu   sync.Mutex
	seen map[string]int
}

func (r *requests) wrap(b storage.Bucket) storage.Bucket { return &recorded{Bucket: b, r: r} }

func (r *requests) add(req string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]int{}
	}
	r.seen[req]++
}

// checkOnce fails the test unless the server was asked, and asked each
// request once: a failure that was retried asks again.
func (r *requests) checkOnce(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) == 0 {
		t.Error("no request reached the server")
	}
	for req, n := range r.seen {
		if n > 1 {
			t.Errorf("%s: asked %d times, was the failure retried?", req, n)
		}
	}
}

type recorded struct {
	storage.Bucket
	r *requests
}

func (b *recorded) List(ctx context.Context, prefix string) ([]storage.Object, error) {
	b.r.add("list " + prefix)
	return b.Bucket.List(ctx, prefix)
}

func (b *recorded) Stat(ctx context.Context, key string) (storage.Object, error) {
	b.r.add("stat " + key)
	return b.Bucket.Stat(ctx, key)
}

func (b *recorded) ReadAt(ctx context.Context, obj storage.Object, p []byte, off int64) (int, error) {
	b.r.add(fmt.Sprintf("read %s at %d", obj.Key, off))
	return b.Bucket.ReadAt(ctx, obj, p, off)
}
