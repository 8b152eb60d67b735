package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/url"
	"strconv"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/sluicedata/sluice/storage"
)

// BucketStore is a Store in a bucket (S3, GCS, Azure, a local directory
// through fileblob, ...), for jobs whose ranks run on different machines.
// Any number of processes may use the same bucket and prefix at once; each
// rank writes only its own objects.
//
// Object layout under the prefix:
//
//	<run>/<step, 20 digits>/rank-<rank>.state   one rank's encoded state
//	<run>/<step, 20 digits>/COMPLETE            world size, in decimal
//	<run>/<step, 20 digits>/COMPLETE.summary    the step judged, for resuming ranks
//	<run>/<step, 20 digits>/COMPLETE.claim      which saver writes the summary
//
// The step is zero-padded so that listings sort numerically. COMPLETE is the
// commit point of a step: whoever saves the last missing rank writes it,
// after listing the step and finding every rank of the world size present.
// That relies on the bucket listing an object once its write has returned,
// which S3, GCS, Azure and local files do. A step counts as complete only
// with its marker and with every rank object decoding and agreeing, so a
// damaged object makes Latest fall back to an older step. Objects under the
// prefix that the store does not write are ignored.
//
// The summary spares each of a thousand resuming ranks reading every
// rank's state: the saver that writes the marker first judges the step
// once and keeps the merged state with every state's MD5; a resuming rank
// takes it where the step's listing shows every state unchanged, and
// judges the step from its states otherwise (see summarize).
type BucketStore struct {
	store
}

var _ Store = (*BucketStore)(nil)

const (
	markerName = "COMPLETE"
	rankPrefix = "rank-"
	rankSuffix = ".state"
	stepDigits = 20
)

// OpenBucketStore returns a store keeping its objects in bucket under
// prefix ("" for the bucket's root; a trailing "/" is added if missing). The
// caller owns the bucket and closes it after the store. OpenBucketStore
// lists the prefix once, so that a bucket that cannot be reached is reported
// now rather than at the first checkpoint.
func OpenBucketStore(ctx context.Context, bucket *blob.Bucket, prefix string) (*BucketStore, error) {
	return openBucketStore(ctx, bucket, prefix, false)
}

// openBucketStore is OpenBucketStore; with owned, the store's Close closes
// the bucket.
func openBucketStore(ctx context.Context, bucket *blob.Bucket, prefix string, owned bool) (*BucketStore, error) {
	if bucket == nil {
		return nil, errors.New("checkpoint: bucket store: bucket is nil")
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if _, _, err := bucket.ListPage(ctx, blob.FirstPageToken, 1, &blob.ListOptions{Prefix: prefix, Delimiter: "/"}); err != nil {
		return nil, fmt.Errorf("checkpoint: bucket store at prefix %q: %w", prefix, err)
	}
	return &BucketStore{store{
		b:    bucketBackend{bucket: bucket, owned: owned},
		keys: bucketLayout{prefix},
		name: fmt.Sprintf("bucket store at prefix %q", prefix),
	}}, nil
}

// OpenBucketStoreURL opens the bucket at a gocloud.dev URL (such as
// "s3://bucket?region=us-east-1&prefix=ckpt/" or "file:///data/ckpt") and
// returns a store at its root; the URL's prefix parameter places the store
// under a prefix. file:// and mem:// are always there; a cloud scheme needs
// its sluice driver imported (storage/s3, gcs, azure; see storage), and
// without one fails saying which to import. The store
// owns the bucket and closes it on Close. Errors show the URL without user
// information or query, where credentials may hide.
func OpenBucketStoreURL(ctx context.Context, urlstr string) (*BucketStore, error) {
	shown := redactURL(urlstr)
	bucket, err := storage.OpenBucket(ctx, urlstr)
	if err != nil {
		err = redacted(err, urlstr, shown)
		if strings.HasPrefix(err.Error(), "open bucket ") { // gocloud's URL openers say it themselves
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
		return nil, fmt.Errorf("checkpoint: open bucket %s: %w", shown, err)
	}
	s, err := openBucketStore(ctx, bucket, "", true)
	if err != nil {
		return nil, errors.Join(redacted(err, urlstr, shown), bucket.Close())
	}
	return s, nil
}

// bucketLayout is the object layout of a BucketStore (see BucketStore).
type bucketLayout struct{ prefix string }

func (l bucketLayout) RunPrefix(run string) string { return l.prefix + run + "/" }

func (l bucketLayout) StepPrefix(run string, step int64) string {
	return fmt.Sprintf("%s%0*d/", l.RunPrefix(run), stepDigits, step)
}

func (l bucketLayout) RankKey(run string, step int64, rank int) string {
	return l.StepPrefix(run, step) + rankPrefix + strconv.Itoa(rank) + rankSuffix
}

func (l bucketLayout) MarkerKey(run string, step int64) string {
	return l.StepPrefix(run, step) + markerName
}

func (bucketLayout) Delim() string { return "/" }

// NamespacePrefix is "": a bucket store keeps no KV namespaces, since any
// name under the prefix could be a run's.
func (bucketLayout) NamespacePrefix(string) string { return "" }

// ParseStep accepts only the canonical spelling of a step, so that another
// directory ("+0000000000000000001/") cannot stand for one.
func (bucketLayout) ParseStep(rest string) (int64, bool) {
	digits, ok := strings.CutSuffix(rest, "/")
	if !ok || len(digits) != stepDigits {
		return 0, false
	}
	step, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || step < 0 || fmt.Sprintf("%0*d", stepDigits, step) != digits {
		return 0, false
	}
	return step, true
}

// ParseRank accepts only the canonical spelling of a rank, so that
// "rank-01.state" cannot shadow rank 1.
func (bucketLayout) ParseRank(rest string) (int, bool) {
	digits, ok := strings.CutPrefix(rest, rankPrefix)
	if !ok {
		return 0, false
	}
	if digits, ok = strings.CutSuffix(digits, rankSuffix); !ok {
		return 0, false
	}
	r, err := strconv.Atoi(digits)
	if err != nil || r < 0 || strconv.Itoa(r) != digits {
		return 0, false
	}
	return r, true
}

// bucketBackend keeps a store's keys as objects of a bucket.
type bucketBackend struct {
	bucket *blob.Bucket
	owned  bool // Close closes the bucket: OpenBucketStoreURL opened it
}

func isNotFound(err error) bool { return gcerrors.Code(err) == gcerrors.NotFound }

func (b bucketBackend) Get(ctx context.Context, key string) ([]byte, error) {
	v, err := b.bucket.ReadAll(ctx, key)
	if isNotFound(err) {
		return nil, ErrNotFound
	}
	return v, err
}

// Put leaves the content type to the bucket, which sniffs it: states come
// out as application/octet-stream and markers as text/plain, as the store
// set them explicitly before its backends were split out.
func (b bucketBackend) Put(ctx context.Context, key string, value []byte) error {
	return b.bucket.WriteAll(ctx, key, value, nil)
}

func (b bucketBackend) Delete(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if err := b.bucket.Delete(ctx, k); err != nil && !isNotFound(err) {
			return err
		}
	}
	return nil
}

func (b bucketBackend) List(ctx context.Context, prefix, delim string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		opts := &blob.ListOptions{Prefix: prefix, Delimiter: delim}
		token := blob.FirstPageToken
		// The first page is small, the next ones the most a bucket gives
		// in one (1,000 on S3): a caller that stops early, as a saver
		// checking whether its step is complete does at the first rank
		// missing, then fetches a few keys rather than a thousand, and a
		// whole listing costs at most one request more.
		size := listFirstPage
		for {
			if err := ctx.Err(); err != nil {
				yield("", err)
				return
			}
			objs, next, err := b.bucket.ListPage(ctx, token, size, opts)
			if err != nil {
				yield("", err)
				return
			}
			for _, obj := range objs {
				// Some drivers (memblob, fileblob) never look at ctx, so
				// a long page would run on after a cancel.
				if err := ctx.Err(); err != nil {
					yield("", err)
					return
				}
				if !yield(obj.Key, nil) {
					return
				}
			}
			if len(next) == 0 {
				return
			}
			token, size = next, listMaxPage
		}
	}
}

// The bucket backend's listing pages: the first holds listFirstPage keys,
// every next one listMaxPage.
const (
	listFirstPage = 128
	listMaxPage   = 1000
)

// Close closes the bucket if the store opened it; a bucket the caller gave
// is the caller's to close.
func (b bucketBackend) Close() error {
	if b.owned {
		return b.bucket.Close()
	}
	return nil
}

// redactURL shows a bucket URL without user information or query.
func redactURL(urlstr string) string {
	u, err := url.Parse(urlstr)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.ForceQuery = nil, "", false
	return u.String()
}

// redacted replaces the raw URL in err's text with its redacted form; the
// chain is kept for errors.Is.
func redacted(err error, raw, shown string) error {
	if err == nil || raw == shown || !strings.Contains(err.Error(), raw) {
		return err
	}
	return &redactedError{err: err, raw: raw, shown: shown}
}

type redactedError struct {
	err        error
	raw, shown string
}

func (e *redactedError) Error() string { return strings.ReplaceAll(e.err.Error(), e.raw, e.shown) }
func (e *redactedError) Unwrap() error { return e.err }
