package e2e_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/sluicedata/sluice/internal/testkit/faults"
	"github.com/sluicedata/sluice/internal/testkit/scratch"
	"github.com/sluicedata/sluice/internal/testkit/synth"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

func TestS3Throttled(t *testing.T)  { testThrottled(t, scratch.S3, faults.S3SlowDown, "SlowDown") }
func TestGCSThrottled(t *testing.T) { testThrottled(t, scratch.GCS, faults.GCSTooManyRequests, "429") }
func TestAzureThrottled(t *testing.T) {
	testThrottled(t, scratch.Azure, faults.AzureServerBusy, "ServerBusy")
}

// testThrottled puts a proxy that answers as the cloud throttles between
// sluice and the backend's server, and checks that:
//   - a storm (the first 40 range reads throttled, then a third of them at
//     random) is ridden out: the epoch's rows, ids and labels, are exactly
//     those of the same epoch from local disk;
//   - a throttled read is retried no sooner than the answer's Retry-After;
//   - a store that throttles longer than RetryPolicy.ThrottleWait fails the
//     read with an error naming the object and the store's answer.
func testThrottled(t *testing.T, be scratch.Backend, answer faults.Answer, says string) {
	sc := newScratch(t, be)
	ctx := context.Background()
	if err := synth.WriteBucket(ctx, sc.Bucket, sc.Key+"data/", e2eSpec); err != nil {
		t.Fatalf("%s: write dataset: %v", be.Name, err)
	}
	want := epochRows(t, e2eOptions(t, writeLocal(t, e2eSpec), 0))

	proxy, dataURL := sc.Proxied(t, "data/", answer)
	proxy.ThrottleFirst(40)
	defer func() {
		if t.Failed() {
			for _, r := range proxy.Requests() {
				t.Log(r)
			}
		}
	}()
	proxy.SetRate(1.0 / 3)
	if got := epochRows(t, e2eOptions(t, dataURL, 0)); !slices.Equal(got, want) {
		t.Errorf("%s: the %d rows read through a storm of %s differ from the %d of the same epoch on local disk", be.Name, len(got), answer.Name, len(want))
	}
	checkRetried(t, be, proxy.Requests(), 40, 0)

	// Retry-After, in whole seconds (and in Azure's milliseconds header).
	proxy.SetRate(0)
	proxy.SetRetryAfter(time.Second)
	proxy.ThrottleFirst(2)
	before := len(proxy.Requests())
	open(t, e2eOptions(t, dataURL, 0)).Close() // reads the footers
	checkRetried(t, be, proxy.Requests()[before:], 2, time.Second)

	// A storm without end: the read fails once ThrottleWait has passed,
	// naming the object and the store's answer.
	proxy.SetRetryAfter(0)
	proxy.SetRate(1)
	o := e2eOptions(t, dataURL, 0)
	o.Storage.Retry = storage.RetryPolicy{ThrottleWait: 2 * time.Second}
	start := time.Now()
	before = len(proxy.Requests())
	_, err := stream.Open(ctx, o)
	if err == nil {
		t.Fatalf("%s: opened through a store that throttles every read", be.Name)
	}
	for _, s := range []string{"/data/part-", ".parquet", "throttled by the store for", says} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: error %q does not say %q", be.Name, err, s)
		}
	}
	if spent := time.Since(start); spent > 30*time.Second {
		t.Errorf("%s: gave up after %v, want about ThrottleWait (2s)", be.Name, spent)
	}
	checkOneRetryLayer(t, be, err, proxy.Requests()[before:])
}

// gaveUp finds, in a read's error, the object's key, the range and the
// attempts it says it made.
var gaveUp = regexp.MustCompile(`read \w+://[^/]+/(\S+) at (\d+)\+(\d+): throttled by the store for [^,]+, (\d+) attempts?`)

// checkOneRetryLayer: the store saw the read that gave up as often as the
// error says it was tried: the SDK's own retries are off for range reads,
// or each attempt would be several requests.
func checkOneRetryLayer(t *testing.T, be scratch.Backend, err error, log []faults.Request) {
	t.Helper()
	m := gaveUp.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("%s: error %q does not say what it read and how often", be.Name, err)
	}
	off, _ := strconv.ParseInt(m[2], 10, 64)
	n, _ := strconv.ParseInt(m[3], 10, 64)
	attempts, _ := strconv.Atoi(m[4])
	want := fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	seen := 0
	for _, r := range log {
		if strings.HasSuffix(r.Path, m[1]) && r.Range == want {
			seen++
		}
	}
	if seen != attempts {
		t.Errorf("%s: the store saw %d requests for %s %s, the error says %d attempts", be.Name, seen, m[1], want, attempts)
	}
}

// epochRows is the epoch of rank 0 as id and label pairs, in order, with
// every label checked against its id.
func epochRows(t *testing.T, o stream.Options) []int64 {
	t.Helper()
	ds := open(t, o)
	var rows []int64
	for b, err := range ds.Batches(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		ids := b.Column(0).(*array.Int64).Int64Values()
		labels := b.Column(1).(*array.Int64).Int64Values()
		for i, id := range ids {
			if labels[i] != e2eSpec.Label(id) {
				t.Fatalf("row %d: label %d, want %d", id, labels[i], e2eSpec.Label(id))
			}
			rows = append(rows, id, labels[i])
		}
	}
	return rows
}

// checkRetried: at least throttled range reads were throttled, and each
// was read again (the same object and range) no sooner than wait after.
func checkRetried(t *testing.T, be scratch.Backend, log []faults.Request, throttled int, wait time.Duration) {
	t.Helper()
	n := 0
	for i, r := range log {
		if !r.Throttled {
			continue
		}
		n++
		j := slices.IndexFunc(log[i+1:], func(o faults.Request) bool { return o.Path == r.Path && o.Range == r.Range })
		if j < 0 {
			t.Errorf("%s: %s %s was throttled and never read again", be.Name, r.Path, r.Range)
			continue
		}
		if gap := log[i+1+j].At.Sub(r.At); gap < wait {
			t.Errorf("%s: %s %s read again %v after it was throttled, want no sooner than %v", be.Name, r.Path, r.Range, gap, wait)
		}
	}
	if n < throttled {
		t.Errorf("%s: %d reads throttled, want at least %d", be.Name, n, throttled)
	}
}
