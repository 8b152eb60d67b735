package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gocloud.dev/gcerrors"
)

// RetryPolicy says how a bucket retries transient failures: server errors,
// throttling, timeouts, connection resets and short bodies. Permanent errors
// (not found, access denied, bad arguments, an object changed since it was
// planned) fail at once. Range reads are retried here only: the drivers
// turn their SDKs' own retries off for them (Driver.PrepareRead), so that
// one policy bounds them.
type RetryPolicy struct {
	// MaxAttempts is the most tries of one request that fails (a server
	// error, a timeout, a reset connection, a short body); answers that
	// throttle it do not count (see ThrottleWait). Default 6; 1 turns
	// every retry off, throttled or not.
	MaxAttempts int
	// BaseDelay is the first backoff; each retry doubles it, with full
	// jitter (a uniform wait between 0 and the delay), so that many readers
	// retrying at once spread out. Default 50 ms.
	BaseDelay time.Duration
	// MaxDelay caps one backoff. Default 2 s.
	MaxDelay time.Duration
	// Timeout bounds one attempt of one request, so a stalled connection is
	// retried instead of hanging a read. Default 60 s; negative: none.
	Timeout time.Duration
	// ThrottleWait bounds how long one request is retried while the store
	// throttles it: 429 Too Many Requests and 503 (S3's SlowDown, Azure's
	// ServerBusy, GCS's rate limits) say to come back later, not that
	// anything failed, and a storm of them lasts seconds to minutes. Such
	// a request is retried with the same backoff, and never sooner than
	// the answer's Retry-After asks (or Azure's x-ms-retry-after-ms), until
	// ThrottleWait has passed since it was first made, or an answer asks
	// for a wait that ends past it; then it fails with an error that says
	// how long the store throttled it. Default 1 minute.
	ThrottleWait time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 6
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = 50 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 2 * time.Second
	}
	if p.Timeout == 0 {
		p.Timeout = 60 * time.Second
	}
	if p.ThrottleWait <= 0 {
		p.ThrottleWait = time.Minute
	}
	return p
}

// ErrTransient may be wrapped by a Bucket's errors to mark them worth
// retrying (fault injection uses it).
var ErrTransient = errors.New("transient storage error")

// Transient reports whether err is worth retrying.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, ErrNotFound) || errors.Is(err, os.ErrPermission) || errors.Is(err, ErrChanged) || permanent(err) {
		return false
	}
	if errors.Is(err, ErrTransient) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return false // no such host: a wrong endpoint, not a passing fault
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	// The status decides where the server gave one: gocloud calls some
	// refusals (a wrong signature, an expired token) Unknown, which would
	// otherwise be retried.
	switch s := httpStatus(err); {
	case s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500:
		return true
	case s >= 400:
		return false
	}
	switch gcerrors.Code(err) {
	case gcerrors.Internal, gcerrors.Unknown, gcerrors.ResourceExhausted, gcerrors.DeadlineExceeded:
		return true
	}
	return false
}

// Retrying wraps b so that its calls retry transient failures by policy.
func Retrying(b Bucket, policy RetryPolicy) Bucket {
	return &retrying{Bucket: b, p: policy.withDefaults()}
}

type retrying struct {
	Bucket
	p RetryPolicy
}

// do runs one request until it succeeds, fails permanently, runs out of
// attempts (or, throttled, of ThrottleWait) or ctx ends. The last error is
// returned wrapped in one that says how often and how long it was tried,
// where it was tried more than once.
func (r *retrying) do(ctx context.Context, call func(ctx context.Context) error) error {
	start := time.Now()
	delay := r.p.BaseDelay
	failed := 0
	for attempt := 1; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if r.p.Timeout > 0 {
			actx, cancel = context.WithTimeout(ctx, r.p.Timeout)
		}
		err := call(actx)
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case !Transient(err):
			return gaveUp(err, attempt, "")
		case r.p.MaxAttempts == 1:
			return err
		}
		wait := time.Duration(rand.Int64N(int64(delay) + 1))
		if Throttled(err) {
			spent := time.Since(start)
			left, asked := r.p.ThrottleWait-spent, retryAfter(err)
			if left <= 0 || asked > left {
				return gaveUp(err, attempt, fmt.Sprintf("throttled by the store for %s (RetryPolicy.ThrottleWait %s)", spent.Round(time.Millisecond), r.p.ThrottleWait))
			}
			wait = min(max(wait, asked), left)
		} else if failed++; failed >= r.p.MaxAttempts {
			return gaveUp(err, attempt, "")
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
		delay = min(2*delay, r.p.MaxDelay)
	}
}

// gaveUp is the error of a request that ended with err after attempts
// tries, saying why it was not tried again where it was retried at all.
func gaveUp(err error, attempts int, why string) error {
	tries := fmt.Sprintf("%d attempts", attempts)
	if attempts == 1 {
		tries = "1 attempt"
	}
	switch {
	case why != "":
		return fmt.Errorf("%s, %s: %w", why, tries, err)
	case attempts > 1:
		return fmt.Errorf("%s: %w", tries, err)
	}
	return err
}

// Throttled reports whether err is a store's answer that it is throttling
// the request (429 Too Many Requests, 503 Service Unavailable: S3's
// SlowDown, Azure's ServerBusy), which says to come back later.
func Throttled(err error) bool {
	switch httpStatus(err) {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return true
	}
	return gcerrors.Code(err) == gcerrors.ResourceExhausted
}

// retryAfter is the wait a throttling answer asks for: Azure's
// x-ms-retry-after-ms (or retry-after-ms), else Retry-After in seconds or as
// an HTTP date; 0 where it asks none.
func retryAfter(err error) time.Duration {
	h := httpHeader(err)
	if h == nil {
		return 0
	}
	for _, k := range []string{"X-Ms-Retry-After-Ms", "Retry-After-Ms"} {
		if ms, err := strconv.ParseInt(strings.TrimSpace(h.Get(k)), 10, 64); err == nil && ms > 0 {
			return time.Duration(ms) * time.Millisecond
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Duration(max(s, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

func (r *retrying) ReadAt(ctx context.Context, obj Object, p []byte, off int64) (n int, err error) {
	err = r.do(ctx, func(ctx context.Context) error {
		n, err = r.Bucket.ReadAt(ctx, obj, p, off)
		return err
	})
	return n, err
}

func (r *retrying) List(ctx context.Context, prefix string) (out []Object, err error) {
	err = r.do(ctx, func(ctx context.Context) error {
		out, err = r.Bucket.List(ctx, prefix)
		return err
	})
	return out, err
}

func (r *retrying) Stat(ctx context.Context, key string) (o Object, err error) {
	err = r.do(ctx, func(ctx context.Context) error {
		o, err = r.Bucket.Stat(ctx, key)
		return err
	})
	return o, err
}
