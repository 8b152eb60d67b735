package storage

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"gocloud.dev/gcerrors"
)

// RetryPolicy says how a bucket retries transient failures: server errors,
// throttling, timeouts, connection resets and short bodies. Permanent errors
// (not found, access denied, bad arguments) fail at once.
type RetryPolicy struct {
	// MaxAttempts is the most tries of one request. Default 6; 1 turns
	// retries off.
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
	if errors.Is(err, ErrNotFound) || errors.Is(err, os.ErrPermission) || errors.Is(err, ErrChanged) {
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
// attempts or ctx ends. The last error is returned as it is.
func (r *retrying) do(ctx context.Context, call func(ctx context.Context) error) error {
	delay := r.p.BaseDelay
	for attempt := 1; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if r.p.Timeout > 0 {
			actx, cancel = context.WithTimeout(ctx, r.p.Timeout)
		}
		err := call(actx)
		cancel()
		if err == nil || ctx.Err() != nil || attempt >= r.p.MaxAttempts || !Transient(err) {
			if ctx.Err() != nil && err != nil {
				return ctx.Err()
			}
			return err
		}
		wait := time.Duration(rand.Int64N(int64(delay) + 1))
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
		delay = min(2*delay, r.p.MaxDelay)
	}
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
