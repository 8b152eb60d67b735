package stream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/split"
)

// ErrPlanMismatch is wrapped when the plan in a PlanStore was made for
// other files or other options than this rank's: the ranks of one job must
// stream one plan, or their splits would not be the same rows.
var ErrPlanMismatch = errors.New("stream: shared plan does not match")

// PlanStore is where the ranks of a job share one plan, so that one rank
// reads every footer and the others read one object instead: the listing
// each rank makes anyway is checked against the plan's file list, and the
// footers come out of the plan. It is an object in a bucket, often beside
// the job's checkpoints:
//
//	Options.PlanStore = &stream.PlanStore{Bucket: ckptBucket, Key: "run-7/plan.json"}
//
// Rank 0 plans when the object does not exist yet and writes it; other
// ranks wait for it (up to Wait) and plan from it. A later run of the job,
// at any world size, finds it and every rank plans from it. The write is
// conditional (if the object does not exist), so where two ranks plan at
// once (one waited past Wait) the first write wins and the other rank
// checks its plan against the winner's. A plan made for other files (one
// added, removed or changed since) or other options is refused with
// ErrPlanMismatch naming the first difference; delete the object, or use
// another key, to plan the changed data.
//
// The plan carries what drivers keep in a formats.Cache (Parquet footers);
// a driver that keeps nothing there reads its footers on every rank still.
type PlanStore struct {
	// Bucket holds the plan. The caller opens and closes it. Required.
	Bucket *blob.Bucket
	// Key is the plan object's key. Required.
	Key string
	// Wait bounds how long a rank other than 0 waits for rank 0 to write
	// the plan before planning itself (and writing it, if still missing):
	// where rank 0 fails to plan, the others find out after Wait, when they
	// fail the same way. The context given to Open bounds it too.
	// Default 5 minutes.
	Wait time.Duration
}

// sharedPlanVersion is the layout of the plan object.
const sharedPlanVersion = 1

// sharedPlan is the plan object: what a rank needs to plan without reading
// footers, and what it checks that the plan is its own.
type sharedPlan struct {
	Version int `json:"version"`
	// Plan is the plan fingerprint (Dataset.Fingerprint).
	Plan          string     `json:"plan"`
	Columns       []string   `json:"columns"`
	ChunkBytes    int64      `json:"chunk_bytes"`
	ShuffleWindow int        `json:"shuffle_window"`
	Files         []planFile `json:"files"`
	// Cache holds what the drivers kept in their cache while planning,
	// by cache key.
	Cache []cacheEntry `json:"cache"`
}

type planFile struct {
	URL     string `json:"url"`
	Size    int64  `json:"size"`
	ModTime int64  `json:"mod_time"` // Unix nanoseconds
	ETag    string `json:"etag,omitempty"`
	Rows    int64  `json:"rows"`
	// Footer digests what planning learned of the file: format, units,
	// counts, sizes and schema.
	Footer string `json:"footer"`
}

type cacheEntry struct {
	Key   []byte `json:"k"`
	Value []byte `json:"v"`
}

// planned is what Open needs of planning.
type planned struct {
	data   *formats.Dataset
	chunks []split.Chunk
	id     string
}

// planDataset plans the dataset: from the PlanStore's plan where there is
// one, else by reading every footer (and, on rank 0 or after Wait, writing
// the plan for the other ranks).
func planDataset(ctx context.Context, o Options, po formats.PlanOptions) (planned, error) {
	ps := o.PlanStore
	if ps == nil {
		return planLocal(ctx, o, po)
	}
	if ps.Bucket == nil || ps.Key == "" {
		return planned{}, errors.New("stream: Options.PlanStore needs a Bucket and a Key")
	}
	sp, err := ps.await(ctx, o.Rank == 0)
	if err != nil {
		return planned{}, err
	}
	if sp != nil {
		return planFrom(ctx, o, po, sp)
	}
	rec := &recordingCache{next: po.Cache, got: map[string][]byte{}}
	po.Cache = rec
	p, err := planLocal(ctx, o, po)
	if err != nil {
		return p, err
	}
	own := describe(o, p, rec.entries())
	raw, err := json.Marshal(own)
	if err != nil {
		p.data.Close()
		return planned{}, fmt.Errorf("stream: shared plan %q: %w", ps.Key, err)
	}
	err = ps.Bucket.WriteAll(ctx, ps.Key, raw, &blob.WriterOptions{IfNotExist: true, ContentType: "application/json"})
	if err == nil {
		return p, nil
	}
	if gcerrors.Code(err) != gcerrors.FailedPrecondition {
		p.data.Close()
		return planned{}, fmt.Errorf("stream: write shared plan %q: %w", ps.Key, err)
	}
	// Another rank wrote first: its plan is the job's, and must be ours.
	theirs, err := ps.load(ctx)
	if err == nil && theirs == nil {
		err = errors.New("it was written and then removed")
	}
	if err != nil {
		p.data.Close()
		return planned{}, fmt.Errorf("stream: shared plan %q: %w", ps.Key, err)
	}
	if err := theirs.check(own); err != nil {
		p.data.Close()
		return planned{}, fmt.Errorf("stream: shared plan %q: %w", ps.Key, err)
	}
	return p, nil
}

// planLocal plans by reading the footers (or the caller's cache).
func planLocal(ctx context.Context, o Options, po formats.PlanOptions) (planned, error) {
	planner := o.Plan
	if planner == nil {
		planner = func(ctx context.Context, po formats.PlanOptions) (*formats.Dataset, error) {
			return formats.Plan(ctx, o.URLs, po)
		}
	}
	data, err := planner(ctx, po)
	if err != nil {
		return planned{}, err // it names the file and what is wrong with it
	}
	// Chunks hold at most a sixteenth of a window, so that a shuffled
	// window mixes rows from at least sixteen places of the dataset (where
	// row groups are that small: they are never cut).
	chunks := split.Chunks(planFiles(data), split.ChunkOptions{TargetBytes: o.ChunkBytes, MaxRows: max(int64(o.ShuffleWindow)/chunksPerWindow, 1)})
	return planned{data: data, chunks: chunks, id: planHash(data, chunks, po.Filter)}, nil
}

// planFrom plans with the footers the shared plan carries and checks that
// the result is that plan.
func planFrom(ctx context.Context, o Options, po formats.PlanOptions, sp *sharedPlan) (planned, error) {
	po.Cache = &replayCache{got: sp.cacheMap(), next: po.Cache}
	p, err := planLocal(ctx, o, po)
	if err != nil {
		return p, err
	}
	if err := sp.check(describe(o, p, nil)); err != nil {
		p.data.Close()
		return planned{}, fmt.Errorf("stream: shared plan %q: %w", o.PlanStore.Key, err)
	}
	return p, nil
}

// describe is the shared plan of p, with the cache entries given.
func describe(o Options, p planned, cache []cacheEntry) *sharedPlan {
	sp := &sharedPlan{Version: sharedPlanVersion, Plan: p.id, Columns: p.data.Columns, ChunkBytes: o.ChunkBytes, ShuffleWindow: o.ShuffleWindow, Cache: cache}
	for _, f := range p.data.Fragments {
		obj := f.Source.Object
		sp.Files = append(sp.Files, planFile{URL: f.URL, Size: f.Size, ModTime: obj.ModTime.UnixNano(), ETag: obj.ETag, Rows: f.Rows, Footer: footerDigest(f)})
	}
	return sp
}

// footerDigest hashes what planning learned of a file.
func footerDigest(f *formats.Fragment) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s %d %d\n", f.Format, f.Size, f.Rows)
	for _, u := range f.Units {
		fmt.Fprintf(h, "u %d %d %d %v\n", u.Rows, u.Bytes, u.Offset, u.Paged)
	}
	if f.Schema != nil {
		fmt.Fprintln(h, f.Schema.String())
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// check returns an error naming the first difference between the stored
// plan sp and a rank's own.
func (sp *sharedPlan) check(own *sharedPlan) error {
	mismatch := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrPlanMismatch, fmt.Sprintf(format, args...))
	}
	switch {
	case !slices.Equal(sp.Columns, own.Columns):
		return mismatch("columns: the plan has %q, this rank %q", sp.Columns, own.Columns)
	case sp.ChunkBytes != own.ChunkBytes:
		return mismatch("ChunkBytes: the plan has %d, this rank %d", sp.ChunkBytes, own.ChunkBytes)
	case sp.ShuffleWindow != own.ShuffleWindow:
		return mismatch("ShuffleWindow: the plan has %d, this rank %d", sp.ShuffleWindow, own.ShuffleWindow)
	}
	theirs := map[string]planFile{}
	for _, f := range sp.Files {
		theirs[f.URL] = f
	}
	mine := map[string]bool{}
	for _, f := range own.Files {
		mine[f.URL] = true
		t, ok := theirs[f.URL]
		switch {
		case !ok:
			return mismatch("file %s is not in the plan (of %d files): added since it was made", f.URL, len(sp.Files))
		case t.Size != f.Size:
			return mismatch("file %s: %d bytes in the plan, %d now", f.URL, t.Size, f.Size)
		case t.ETag != f.ETag:
			return mismatch("file %s: ETag %q in the plan, %q now", f.URL, t.ETag, f.ETag)
		case t.ModTime != f.ModTime:
			return mismatch("file %s: modified at %s in the plan, %s now", f.URL, time.Unix(0, t.ModTime).UTC().Format(time.RFC3339Nano), time.Unix(0, f.ModTime).UTC().Format(time.RFC3339Nano))
		case t.Rows != f.Rows:
			return mismatch("file %s: %d rows in the plan, %d now", f.URL, t.Rows, f.Rows)
		case t.Footer != f.Footer:
			return mismatch("file %s: its footer digest is %s in the plan, %s now", f.URL, t.Footer, f.Footer)
		}
	}
	for _, f := range sp.Files {
		if !mine[f.URL] {
			return mismatch("file %s of the plan is not found: removed since it was made, or the URLs differ", f.URL)
		}
	}
	if sp.Plan != own.Plan {
		return mismatch("plan fingerprint %s, this rank's %s (the same files in another order, or other chunks)", sp.Plan, own.Plan)
	}
	return nil
}

// cacheMap is the plan's cache entries by key.
func (sp *sharedPlan) cacheMap() map[string][]byte {
	m := make(map[string][]byte, len(sp.Cache))
	for _, e := range sp.Cache {
		m[string(e.Key)] = e.Value
	}
	return m
}

// decodeSharedPlan parses a plan object; it comes from a bucket, so it is
// checked, not trusted.
func decodeSharedPlan(raw []byte) (*sharedPlan, error) {
	var sp sharedPlan
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sp); err != nil {
		return nil, fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the plan", formats.ErrCorrupt)
	}
	switch {
	case sp.Version != sharedPlanVersion:
		return nil, fmt.Errorf("%w: plan version %d, this build reads %d", formats.ErrCorrupt, sp.Version, sharedPlanVersion)
	case sp.Plan == "" || len(sp.Files) == 0:
		return nil, fmt.Errorf("%w: plan without a fingerprint or files", formats.ErrCorrupt)
	}
	return &sp, nil
}

// load reads the plan, or returns nil if there is none.
func (ps *PlanStore) load(ctx context.Context) (*sharedPlan, error) {
	raw, err := ps.Bucket.ReadAll(ctx, ps.Key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream: read shared plan %q: %w", ps.Key, err)
	}
	sp, err := decodeSharedPlan(raw)
	if err != nil {
		return nil, fmt.Errorf("stream: shared plan %q: %w", ps.Key, err)
	}
	return sp, nil
}

// await returns the stored plan. If there is none, the planner (rank 0)
// gets nil at once; another rank polls for it, backing off from 50 ms to
// 1 s, and gets nil once Wait has passed.
func (ps *PlanStore) await(ctx context.Context, planner bool) (*sharedPlan, error) {
	wait := ps.Wait
	if wait <= 0 {
		wait = 5 * time.Minute
	}
	deadline := time.Now().Add(wait)
	pause := 50 * time.Millisecond
	for {
		sp, err := ps.load(ctx)
		if err != nil || sp != nil || planner || time.Now().After(deadline) {
			return sp, err
		}
		t := time.NewTimer(min(pause, time.Until(deadline)+time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("stream: waiting for shared plan %q: %w", ps.Key, ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
	}
}

// recordingCache passes through to the caller's cache, if any, and keeps
// every entry the drivers set or found: the planner's entries go into the
// shared plan.
type recordingCache struct {
	next formats.Cache
	mu   sync.Mutex
	got  map[string][]byte
}

func (c *recordingCache) Get(ctx context.Context, key []byte) ([]byte, error) {
	if c.next == nil {
		return nil, errNoEntry
	}
	v, err := c.next.Get(ctx, key)
	if err == nil && len(v) > 0 {
		c.keep(key, v)
	}
	return v, err
}

func (c *recordingCache) Set(ctx context.Context, key, value []byte) error {
	c.keep(key, value)
	if c.next == nil {
		return nil
	}
	return c.next.Set(ctx, key, value)
}

func (c *recordingCache) keep(key, value []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got[string(key)] = bytes.Clone(value)
}

// entries lists what was kept, by key, so that the plan object is the same
// whichever rank writes it.
func (c *recordingCache) entries() []cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]cacheEntry, 0, len(c.got))
	for _, k := range slices.Sorted(maps.Keys(c.got)) {
		out = append(out, cacheEntry{Key: []byte(k), Value: c.got[k]})
	}
	return out
}

// replayCache answers from the shared plan's entries, then the caller's
// cache. It keeps nothing new: a miss is a file the plan does not know,
// which the check refuses anyway.
type replayCache struct {
	got  map[string][]byte
	next formats.Cache
}

var errNoEntry = errors.New("stream: no cache entry")

func (c *replayCache) Get(ctx context.Context, key []byte) ([]byte, error) {
	if v, ok := c.got[string(key)]; ok {
		return v, nil
	}
	if c.next == nil {
		return nil, errNoEntry
	}
	return c.next.Get(ctx, key)
}

func (c *replayCache) Set(ctx context.Context, key, value []byte) error {
	if c.next == nil {
		return nil
	}
	return c.next.Set(ctx, key, value)
}
