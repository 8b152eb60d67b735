package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/sluicedata/sluice/internal/bucketurl"
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
//
// The step is zero-padded so that listings sort numerically. COMPLETE is the
// commit point of a step: whoever saves the last missing rank writes it,
// after listing the step and finding every rank of the world size present.
// That relies on the bucket listing an object once its write has returned,
// which S3, GCS, Azure and local files do. A step counts as complete only
// with its marker and with every rank object decoding and agreeing, so a
// damaged object makes Latest fall back to an older step.
type BucketStore struct {
	bucket *blob.Bucket
	prefix string
	owned  bool // Close closes the bucket: OpenBucketStoreURL opened it

	mu     sync.RWMutex
	closed bool
}

var _ Store = (*BucketStore)(nil)

const (
	markerName   = "COMPLETE"
	rankPrefix   = "rank-"
	rankSuffix   = ".state"
	stepDigits   = 20
	readParallel = 16 // objects read at once when loading a step
)

// OpenBucketStore returns a store keeping its objects in bucket under
// prefix ("" for the bucket's root; a trailing "/" is added if missing). The
// caller owns the bucket and closes it after the store. OpenBucketStore
// lists the prefix once, so that a bucket that cannot be reached is reported
// now rather than at the first checkpoint.
func OpenBucketStore(ctx context.Context, bucket *blob.Bucket, prefix string) (*BucketStore, error) {
	if bucket == nil {
		return nil, errors.New("checkpoint: bucket store: bucket is nil")
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if _, _, err := bucket.ListPage(ctx, blob.FirstPageToken, 1, &blob.ListOptions{Prefix: prefix, Delimiter: "/"}); err != nil {
		return nil, fmt.Errorf("checkpoint: bucket store at prefix %q: %w", prefix, err)
	}
	return &BucketStore{bucket: bucket, prefix: prefix}, nil
}

// OpenBucketStoreURL opens the bucket at a gocloud.dev URL (such as
// "s3://bucket?region=us-east-1&prefix=ckpt/" or "file:///data/ckpt") and
// returns a store at its root; the URL's prefix parameter places the store
// under a prefix. file:// and mem:// are always there; a cloud scheme needs
// its sluice driver imported (formats/storage/s3, gcs, azure; see
// formats/storage), and without one fails saying which to import. The store
// owns the bucket and closes it on Close. Errors show the URL without user
// information or query, where credentials may hide.
func OpenBucketStoreURL(ctx context.Context, urlstr string) (*BucketStore, error) {
	shown := redactURL(urlstr)
	bucket, err := bucketurl.Open(ctx, urlstr)
	if err != nil {
		err = redacted(err, urlstr, shown)
		if strings.HasPrefix(err.Error(), "open bucket ") { // gocloud's URL openers say it themselves
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
		return nil, fmt.Errorf("checkpoint: open bucket %s: %w", shown, err)
	}
	s, err := OpenBucketStore(ctx, bucket, "")
	if err != nil {
		return nil, errors.Join(redacted(err, urlstr, shown), bucket.Close())
	}
	s.owned = true
	return s, nil
}

// Close implements Store. It closes the bucket only if OpenBucketStoreURL
// opened it. Closing twice is not an error.
func (s *BucketStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.owned {
		if err := s.bucket.Close(); err != nil {
			return fmt.Errorf("checkpoint: close bucket store: %w", err)
		}
	}
	return nil
}

func (s *BucketStore) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return fmt.Errorf("%w: bucket store at prefix %q", ErrClosed, s.prefix)
	}
	return nil
}

func (s *BucketStore) runDir(run string) string { return s.prefix + run + "/" }

func (s *BucketStore) stepDir(run string, step int64) string {
	return fmt.Sprintf("%s%0*d/", s.runDir(run), stepDigits, step)
}

func (s *BucketStore) rankKey(run string, step int64, rank int) string {
	return s.stepDir(run, step) + rankPrefix + strconv.Itoa(rank) + rankSuffix
}

// parseRank returns the rank an object name within a step stands for. Only
// the canonical spelling counts, so "rank-01.state" cannot shadow rank 1.
func parseRank(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, rankPrefix)
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

func isNotFound(err error) bool { return gcerrors.Code(err) == gcerrors.NotFound }

// Save implements Store: it writes the rank's object and, if that completes
// the step, the step's marker.
func (s *BucketStore) Save(ctx context.Context, run string, step int64, rank int, st State) error {
	if err := checkSave(run, step, rank, &st); err != nil {
		return err
	}
	b, err := Encode(st)
	if err != nil {
		return fmt.Errorf("checkpoint: save run %q step %d rank %d: %w", run, step, rank, trimPrefix(err))
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	wopts := &blob.WriterOptions{ContentType: "application/octet-stream"}
	if err := s.bucket.WriteAll(ctx, s.rankKey(run, step, rank), b, wopts); err != nil {
		return fmt.Errorf("checkpoint: save run %q step %d rank %d: %w", run, step, rank, err)
	}
	ranks, _, err := s.listStep(ctx, run, step)
	if err != nil {
		return fmt.Errorf("checkpoint: save run %q step %d rank %d: list step: %w", run, step, rank, err)
	}
	for r := range st.WorldSize {
		if _, ok := slices.BinarySearch(ranks, r); !ok {
			return nil // a rank still to come writes the marker
		}
	}
	marker := []byte(strconv.Itoa(st.WorldSize) + "\n")
	if err := s.bucket.WriteAll(ctx, s.stepDir(run, step)+markerName, marker, &blob.WriterOptions{ContentType: "text/plain"}); err != nil {
		return fmt.Errorf("checkpoint: save run %q step %d rank %d: write completion marker: %w", run, step, rank, err)
	}
	return nil
}

// listStep returns the ranks with an object in a step, ascending, and
// whether the step has a marker.
func (s *BucketStore) listStep(ctx context.Context, run string, step int64) (ranks []int, marker bool, err error) {
	dir := s.stepDir(run, step)
	it := s.bucket.List(&blob.ListOptions{Prefix: dir, Delimiter: "/"})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, false, err
		}
		name := strings.TrimPrefix(obj.Key, dir)
		if obj.IsDir {
			continue
		}
		if name == markerName {
			marker = true
		} else if r, ok := parseRank(name); ok {
			ranks = append(ranks, r)
		}
	}
	slices.Sort(ranks)
	return ranks, marker, nil
}

// listSteps returns the steps of a run, ascending.
func (s *BucketStore) listSteps(ctx context.Context, run string) ([]int64, error) {
	dir := s.runDir(run)
	it := s.bucket.List(&blob.ListOptions{Prefix: dir, Delimiter: "/"})
	var steps []int64
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("checkpoint: list run %q: %w", run, err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(obj.Key, dir), "/")
		if !obj.IsDir || len(name) != stepDigits {
			continue
		}
		if step, err := strconv.ParseInt(name, 10, 64); err == nil && step >= 0 {
			steps = append(steps, step)
		}
	}
	slices.Sort(steps)
	return steps, nil
}

// readMarker returns the world size a step's marker records, 0 if it has
// none, or an error wrapping ErrCorrupt if the marker is not a number.
func (s *BucketStore) readMarker(ctx context.Context, run string, step int64) (int, error) {
	b, err := s.bucket.ReadAll(ctx, s.stepDir(run, step)+markerName)
	if isNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("checkpoint: run %q step %d: read completion marker: %w", run, step, err)
	}
	w, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || w < 1 {
		return 0, fmt.Errorf("checkpoint: run %q step %d: %w", run, step, corrupt("completion marker holds %q, not a world size", b))
	}
	return w, nil
}

// assess reads everything stored for a step and judges it. The info names
// the step and says why it is not complete even when reading failed.
func (s *BucketStore) assess(ctx context.Context, run string, step int64) (StepInfo, State, error) {
	failed := func(err error) (StepInfo, State, error) {
		return StepInfo{Step: step, Reason: err.Error()}, State{}, err
	}
	rankNos, hasMarker, err := s.listStep(ctx, run, step)
	if err != nil {
		return failed(fmt.Errorf("checkpoint: run %q step %d: list: %w", run, step, err))
	}
	world, markerErr := 0, error(nil)
	if hasMarker {
		world, markerErr = s.readMarker(ctx, run, step)
	}
	ranks := s.readRanks(ctx, run, step, rankNos)
	if err := ctx.Err(); err != nil {
		return failed(err)
	}
	info, merged, err := assessStep(run, step, ranks, world)
	if markerErr != nil {
		info.Complete, info.Reason = false, markerErr.Error()
		return info, State{}, markerErr
	}
	return info, merged, err
}

// readRanks reads rank objects a few at a time: a step of a large job has
// hundreds, and one at a time the latency of each would add up.
func (s *BucketStore) readRanks(ctx context.Context, run string, step int64, rankNos []int) []storedRank {
	out := make([]storedRank, len(rankNos))
	sem := make(chan struct{}, readParallel)
	var wg sync.WaitGroup
	for i, r := range rankNos {
		out[i].rank = r
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			b, err := s.bucket.ReadAll(ctx, s.rankKey(run, step, r))
			if isNotFound(err) {
				err = fmt.Errorf("vanished while being read: %w", trimPrefix(ErrNotFound))
			}
			out[i].data, out[i].err = b, err
		}()
	}
	wg.Wait()
	return out
}

// Load implements Store.
func (s *BucketStore) Load(ctx context.Context, run string, step int64, rank int) (State, error) {
	if err := checkRank(run, step, rank); err != nil {
		return State{}, err
	}
	if err := s.enter(ctx); err != nil {
		return State{}, err
	}
	defer s.mu.RUnlock()
	b, err := s.bucket.ReadAll(ctx, s.rankKey(run, step, rank))
	if isNotFound(err) {
		return State{}, fmt.Errorf("checkpoint: run %q step %d rank %d: %w", run, step, rank, trimPrefix(ErrNotFound))
	}
	return decodeStored(run, step, storedRank{rank: rank, data: b, err: err})
}

// LoadStep implements Store. A step whose marker is missing is incomplete
// even when every rank's object is present: the saver of the last rank may
// have failed before writing it.
func (s *BucketStore) LoadStep(ctx context.Context, run string, step int64) (State, error) {
	if err := checkStep(run, step); err != nil {
		return State{}, err
	}
	if err := s.enter(ctx); err != nil {
		return State{}, err
	}
	defer s.mu.RUnlock()
	_, merged, err := s.assess(ctx, run, step)
	return merged, err
}

// Latest implements Store. It walks steps from the newest back and reads a
// step's rank objects only once its marker is found.
func (s *BucketStore) Latest(ctx context.Context, run string) (int64, error) {
	if err := checkRun(run); err != nil {
		return 0, err
	}
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.mu.RUnlock()
	steps, err := s.listSteps(ctx, run)
	if err != nil {
		return 0, err
	}
	for _, step := range slices.Backward(steps) {
		w, err := s.readMarker(ctx, run, step)
		if err != nil {
			if skippable(err) {
				continue // a damaged marker: fall back as for a damaged state
			}
			return 0, err
		}
		if w == 0 {
			continue
		}
		info, _, err := s.assess(ctx, run, step)
		if info.Complete {
			return step, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return 0, cerr
		}
		if !skippable(err) {
			return 0, err
		}
	}
	return 0, fmt.Errorf("checkpoint: run %q has no complete step: %w", run, trimPrefix(ErrNotFound))
}

// List implements Store.
func (s *BucketStore) List(ctx context.Context, run string) ([]StepInfo, error) {
	if err := checkRun(run); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	return s.list(ctx, run)
}

func (s *BucketStore) list(ctx context.Context, run string) ([]StepInfo, error) {
	steps, err := s.listSteps(ctx, run)
	if err != nil {
		return nil, err
	}
	infos := make([]StepInfo, 0, len(steps))
	for _, step := range steps {
		info, _, _ := s.assess(ctx, run, step)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		infos = append(infos, info)
	}
	return infos, nil
}

// Delete implements Store. The marker goes first, so a step half deleted by
// a failure is incomplete rather than complete with ranks missing.
func (s *BucketStore) Delete(ctx context.Context, run string, step int64) error {
	if err := checkStep(run, step); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	return s.delete(ctx, run, step)
}

func (s *BucketStore) delete(ctx context.Context, run string, step int64) error {
	dir := s.stepDir(run, step)
	if err := s.bucket.Delete(ctx, dir+markerName); err != nil && !isNotFound(err) {
		return fmt.Errorf("checkpoint: delete run %q step %d: completion marker: %w", run, step, err)
	}
	it := s.bucket.List(&blob.ListOptions{Prefix: dir})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("checkpoint: delete run %q step %d: list: %w", run, step, err)
		}
		if obj.IsDir {
			continue
		}
		if err := s.bucket.Delete(ctx, obj.Key); err != nil && !isNotFound(err) {
			return fmt.Errorf("checkpoint: delete run %q step %d: %w", run, step, err)
		}
	}
}

// Retain implements Store.
func (s *BucketStore) Retain(ctx context.Context, run string, keep int) error {
	if err := checkKeep(run, keep); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	infos, err := s.list(ctx, run)
	if err != nil {
		return err
	}
	oldest, ok := pickRetained(infos, keep)
	if !ok {
		return nil
	}
	for _, info := range infos {
		if info.Step >= oldest {
			break
		}
		if err := s.delete(ctx, run, info.Step); err != nil {
			return fmt.Errorf("checkpoint: retain run %q: %w", run, trimPrefix(err))
		}
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
