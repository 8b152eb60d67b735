package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// flaky fails its first n calls with err, then delegates.
type flaky struct {
	Bucket
	n     int
	err   error
	calls int
}

func (f *flaky) ReadAt(ctx context.Context, obj Object, p []byte, off int64) (int, error) {
	f.calls++
	if f.calls <= f.n {
		return 0, f.err
	}
	return f.Bucket.ReadAt(ctx, obj, p, off)
}

type memBucket struct{ data []byte }

func (m memBucket) List(context.Context, string) ([]Object, error) { return nil, nil }
func (m memBucket) Stat(context.Context, string) (Object, error) {
	return Object{Size: int64(len(m.data))}, nil
}
func (m memBucket) Scheme() string { return "test" }
func (m memBucket) Close() error   { return nil }
func (m memBucket) ReadAt(_ context.Context, _ Object, p []byte, off int64) (int, error) {
	return copy(p, m.data[off:]), nil
}

func TestRetryTransient(t *testing.T) {
	fast := RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}
	for _, cause := range []error{ErrTransient, io.ErrUnexpectedEOF, context.DeadlineExceeded} {
		f := &flaky{Bucket: memBucket{[]byte("hello")}, n: 3, err: fmt.Errorf("boom: %w", cause)}
		p := make([]byte, 5)
		n, err := Retrying(f, fast).ReadAt(context.Background(), Object{Key: "k"}, p, 0)
		if err != nil || n != 5 || string(p) != "hello" || f.calls != 4 {
			t.Fatalf("%v: got n=%d err=%v after %d calls, want success on the 4th", cause, n, err, f.calls)
		}
	}
	// Out of attempts: the last error comes back.
	f := &flaky{Bucket: memBucket{[]byte("x")}, n: 100, err: ErrTransient}
	_, err := Retrying(f, RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond}).ReadAt(context.Background(), Object{Key: "k"}, make([]byte, 1), 0)
	if !errors.Is(err, ErrTransient) || f.calls != 3 {
		t.Fatalf("got %v after %d calls, want the transient error after 3", err, f.calls)
	}
}

func TestRetryPermanentFailsAtOnce(t *testing.T) {
	f := &flaky{Bucket: memBucket{[]byte("x")}, n: 100, err: fmt.Errorf("object k: %w", ErrNotFound)}
	_, err := Retrying(f, RetryPolicy{BaseDelay: time.Second}).ReadAt(context.Background(), Object{Key: "k"}, make([]byte, 1), 0)
	if !errors.Is(err, ErrNotFound) || f.calls != 1 {
		t.Fatalf("got %v after %d calls, want not found at once", err, f.calls)
	}
}

// TestRetryStopsOnCancel runs in a synctest bubble, whose clock moves only
// by the timers here, so "promptly" is measured without the machine's load.
func TestRetryStopsOnCancel(t *testing.T) { synctest.Test(t, testRetryStopsOnCancel) }

func testRetryStopsOnCancel(t *testing.T) {
	f := &flaky{Bucket: memBucket{[]byte("x")}, n: 100, err: ErrTransient}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Retrying(f, RetryPolicy{MaxAttempts: 1000, BaseDelay: 10 * time.Millisecond, MaxDelay: 10 * time.Millisecond}).ReadAt(ctx, Object{Key: "k"}, make([]byte, 1), 0)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("got %v after %v, want the context's error promptly", err, time.Since(start))
	}
}

// statusError is an SDK's error type that carries an HTTP status, seen only
// by the test driver that registers a reader for it, as the cloud drivers do
// for theirs (their tests check their own types).
type statusError struct {
	status int
	header http.Header
}

func (e *statusError) Error() string { return fmt.Sprintf("api error %d", e.status) }

func init() {
	Register(Driver{Scheme: "statustest", HTTPStatus: func(err error) int {
		var se *statusError
		if errors.As(err, &se) {
			return se.status
		}
		return 0
	}, HTTPHeader: func(err error) http.Header {
		var se *statusError
		if errors.As(err, &se) {
			return se.header
		}
		return nil
	}})
}

// The HTTP status a driver reads from its SDK's error decides: refusals are
// permanent even where gocloud has no code for them, server errors and
// throttling are transient. Without a status, gocloud's code decides.
func TestTransientByStatus(t *testing.T) {
	for _, c := range []struct {
		status    int
		transient bool
	}{{400, false}, {401, false}, {403, false}, {408, true}, {429, true}, {500, true}, {503, true}} {
		err := fmt.Errorf("blob (code=Unknown): %w", &statusError{status: c.status})
		if got := Transient(err); got != c.transient {
			t.Errorf("%d: Transient = %t, want %t", c.status, got, c.transient)
		}
	}
	if !Transient(errors.New("blob (code=Unknown): api error SignatureDoesNotMatch")) {
		t.Error("an error of code Unknown without a status is not retried")
	}
	// A host that does not resolve is a wrong endpoint; a resolver that
	// times out may answer next time.
	noHost := &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "s3.example.invalid", IsNotFound: true}}
	if Transient(fmt.Errorf("blob (code=Unknown): %w", noHost)) {
		t.Error("no such host counts as transient")
	}
	slowDNS := &net.OpError{Op: "dial", Err: &net.DNSError{Err: "i/o timeout", Name: "s3.example.com", IsTimeout: true}}
	if !Transient(fmt.Errorf("blob (code=Unknown): %w", slowDNS)) {
		t.Error("a DNS timeout does not count as transient")
	}
}

// throttling answers n times with a throttling error of status whose
// header asks for retryAfter, then delegates; it keeps when each call came.
type throttling struct {
	flaky
	at []time.Time
}

func newThrottling(n, status int, header http.Header) *throttling {
	return &throttling{flaky: flaky{Bucket: memBucket{[]byte("hello")}, n: n, err: fmt.Errorf("blob (code=Unknown): %w", &statusError{status, header})}}
}

func (f *throttling) ReadAt(ctx context.Context, obj Object, p []byte, off int64) (int, error) {
	f.at = append(f.at, time.Now())
	return f.flaky.ReadAt(ctx, obj, p, off)
}

// A throttled read is retried no sooner than Retry-After (or Azure's
// x-ms-retry-after-ms) asks, and throttling does not use up MaxAttempts.
func TestRetryAfterHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, c := range []struct {
			status int
			header http.Header
			want   time.Duration
		}{
			{http.StatusServiceUnavailable, http.Header{"Retry-After": {"3"}}, 3 * time.Second},
			{http.StatusTooManyRequests, http.Header{"Retry-After": {"2"}}, 2 * time.Second},
			{http.StatusServiceUnavailable, http.Header{"Retry-After": {"1"}, "X-Ms-Retry-After-Ms": {"1500"}}, 1500 * time.Millisecond},
		} {
			f := newThrottling(4, c.status, c.header)
			p := make([]byte, 5)
			n, err := Retrying(f, RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond}).ReadAt(context.Background(), Object{Key: "k"}, p, 0)
			if err != nil || n != 5 || string(p) != "hello" || len(f.at) != 5 {
				t.Fatalf("%v: n=%d err=%v after %d calls, want success on the 5th", c.header, n, err, len(f.at))
			}
			for i := 1; i < len(f.at); i++ {
				if gap := f.at[i].Sub(f.at[i-1]); gap < c.want {
					t.Errorf("%v: retry %d after %v, want no sooner than %v", c.header, i, gap, c.want)
				}
			}
		}
		// A date: no retry before it (HTTP dates are whole seconds).
		date := time.Now().Add(4 * time.Second).UTC().Truncate(time.Second)
		f := newThrottling(1, http.StatusServiceUnavailable, http.Header{"Retry-After": {date.Format(http.TimeFormat)}})
		if _, err := Retrying(f, RetryPolicy{}).ReadAt(context.Background(), Object{Key: "k"}, make([]byte, 1), 0); err != nil || len(f.at) != 2 || f.at[1].Before(date) {
			t.Errorf("Retry-After %s: %v, retried at %v", date, err, f.at)
		}
	})
}

// A store that throttles a read for longer than ThrottleWait fails it, saying
// so, with the store's answer wrapped; a Retry-After that would end past the
// bound fails it at once.
func TestThrottleWaitBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newThrottling(1<<30, http.StatusServiceUnavailable, nil)
		start := time.Now()
		_, err := Retrying(f, RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second, ThrottleWait: 10 * time.Second}).ReadAt(context.Background(), Object{Key: "k"}, make([]byte, 1), 0)
		var se *statusError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), "throttled by the store for") || !strings.Contains(err.Error(), "ThrottleWait 10s") {
			t.Fatalf("got %v, want the store's answer after ThrottleWait", err)
		}
		if spent := time.Since(start); spent != 10*time.Second || len(f.at) < 10 {
			t.Errorf("gave up after %v and %d calls, want 10s and more than MaxAttempts' 6", spent, len(f.at))
		}

		f = newThrottling(1<<30, http.StatusTooManyRequests, http.Header{"Retry-After": {"20"}})
		start = time.Now()
		_, err = Retrying(f, RetryPolicy{ThrottleWait: 10 * time.Second}).ReadAt(context.Background(), Object{Key: "k"}, make([]byte, 1), 0)
		if !errors.As(err, &se) || len(f.at) != 1 || time.Since(start) != 0 {
			t.Fatalf("got %v after %d calls and %v, want the answer at once", err, len(f.at), time.Since(start))
		}
	})
}
