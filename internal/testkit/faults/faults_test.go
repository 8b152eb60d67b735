package faults

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/sluicedata/sluice/storage"
)

// bytesBucket serves one object of the given bytes under every key.
type bytesBucket struct{ data []byte }

func (m bytesBucket) List(context.Context, string) ([]storage.Object, error) {
	return []storage.Object{{Key: "k", Size: int64(len(m.data))}}, nil
}
func (m bytesBucket) Stat(context.Context, string) (storage.Object, error) {
	return storage.Object{Key: "k", Size: int64(len(m.data))}, nil
}
func (m bytesBucket) Scheme() string { return "test" }
func (m bytesBucket) Close() error   { return nil }
func (m bytesBucket) ReadAt(_ context.Context, _ storage.Object, p []byte, off int64) (int, error) {
	return copy(p, m.data[off:]), nil
}

func TestInject(t *testing.T) {
	f := New(bytesBucket{make([]byte, 100)}, 1)
	f.ErrorRate, f.TruncateRate = 0.2, 0.2
	var errs, shorts int
	for range 1000 {
		n, err := f.ReadAt(context.Background(), storage.Object{Key: "k"}, make([]byte, 100), 0)
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF):
			shorts++
			if n >= 100 {
				t.Fatal("a truncated read delivered everything")
			}
		case errors.Is(err, storage.ErrTransient):
			errs++
			if !storage.Transient(err) {
				t.Fatalf("an injected error is not retried: %v", err)
			}
		}
	}
	if errs < 120 || errs > 280 || shorts < 100 || shorts > 260 || f.Injected() != errs+shorts {
		t.Fatalf("%d errors and %d short reads of 1000 at rates 0.2, 0.2; injected %d", errs, shorts, f.Injected())
	}
}

// Faults is meant to sit inside storage's retries: with them, every read
// succeeds whole despite the injected failures.
func TestRetriedFaultsDeliverEverything(t *testing.T) {
	data := make([]byte, 100)
	for i := range data {
		data[i] = byte(i)
	}
	f := New(bytesBucket{data}, 7)
	f.ErrorRate, f.TruncateRate = 0.3, 0.3
	b := storage.Retrying(f, storage.RetryPolicy{MaxAttempts: 50, BaseDelay: time.Microsecond, MaxDelay: time.Microsecond})
	for i := range 200 {
		p := make([]byte, 100)
		if n, err := b.ReadAt(context.Background(), storage.Object{Key: "k"}, p, 0); err != nil || n != 100 || p[99] != 99 {
			t.Fatalf("read %d: n=%d err=%v", i, n, err)
		}
		if _, err := b.List(context.Background(), ""); err != nil {
			t.Fatalf("list %d: %v", i, err)
		}
	}
	if f.Injected() == 0 {
		t.Fatal("no fault injected")
	}
}
