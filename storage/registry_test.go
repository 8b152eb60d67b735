package storage

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
)

// This package's tests link no cloud driver, as a program that imports none:
// their URLs fail at once, naming the package to import, and nothing else
// (file, mem) changes.
func TestNoDriverNamesThePackage(t *testing.T) {
	ctx := context.Background()
	for scheme, pkg := range driverPackages {
		_, err := OpenBucket(ctx, scheme+"://bucket?secret=hunter22")
		if !errors.Is(err, ErrNoDriver) {
			t.Errorf("%s: %v, want ErrNoDriver", scheme, err)
			continue
		}
		if !strings.Contains(err.Error(), `import _ "`+pkg+`"`) || !strings.Contains(err.Error(), scheme+"://") {
			t.Errorf("%s: %q does not say which package to import", scheme, err)
		}
		if strings.Contains(err.Error(), "hunter22") {
			t.Errorf("%s: %q shows the query", scheme, err)
		}
	}
	b, err := OpenBucket(ctx, "mem://")
	if err != nil {
		t.Fatalf("mem: %v", err)
	}
	b.Close()
	if b, err = OpenBucket(ctx, "file://"+t.TempDir()); err != nil {
		t.Fatalf("file: %v", err)
	}
	b.Close()
	// A scheme that is neither sluice's nor linked keeps gocloud's own error.
	if _, err := OpenBucket(ctx, "nosuch://bucket"); err == nil || errors.Is(err, ErrNoDriver) {
		t.Errorf("nosuch: %v, want gocloud's unknown-scheme error", err)
	}
}

type coded struct{ status int }

func (c coded) Error() string { return "coded" }

// A registered driver's opener serves its scheme, and its status reader
// classifies errors; registering a scheme twice is a linking mistake.
func TestRegister(t *testing.T) {
	want := memblob.OpenBucket(nil)
	defer want.Close()
	var opened string
	Register(Driver{
		Scheme: "registertest",
		Open: func(_ context.Context, u string) (*blob.Bucket, error) {
			opened = u
			return want, nil
		},
		HTTPStatus: func(err error) int {
			var c coded
			if errors.As(err, &c) {
				return c.status
			}
			return 0
		},
	})
	got, err := OpenBucket(context.Background(), "registertest://b?x=1")
	if err != nil || got != want || opened != "registertest://b?x=1" {
		t.Fatalf("Open = %v, %v (opener saw %q), want the registered opener's bucket", got, err, opened)
	}
	if !registered("registertest") || registered("s3") {
		t.Error("Registered does not tell which schemes have drivers")
	}
	if s := httpStatus(errors.Join(errors.New("x"), coded{503})); s != 503 {
		t.Errorf("httpStatus = %d, want 503 from the registered reader", s)
	}
	if s := httpStatus(errors.New("plain")); s != 0 {
		t.Errorf("httpStatus of an error with no status = %d", s)
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a scheme twice did not panic")
		}
	}()
	Register(Driver{Scheme: "registertest"})
}
