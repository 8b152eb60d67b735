package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"google.golang.org/api/googleapi"

	"github.com/sluicedata/sluice/storage"
)

// A refusal that gocloud calls Unknown fails at once; a server error or
// throttling is retried. Through storage.Transient, so that the registration
// is checked too.
func TestTransientByStatus(t *testing.T) {
	for status, transient := range map[int]bool{400: false, 401: false, 403: false, 408: true, 429: true, 500: true, 503: true} {
		err := fmt.Errorf("blob (code=Unknown): %w", &googleapi.Error{Code: status})
		if got := storage.Transient(err); got != transient {
			t.Errorf("%d: Transient = %t, want %t", status, got, transient)
		}
	}
}

// stdout runs fn and returns what it wrote to standard output.
func stdout(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	defer func() { os.Stdout = saved }()
	fn()
	w.Close()
	return <-done
}

// gs:// without Google credentials: opening fails saying what to do, unless
// the URL asks for anonymous access; either way nothing is printed (gocloud's
// own opener prints a warning to standard output). Through a Resolver, so
// that the registered opener is the one used.
func TestWithoutCredentials(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("STORAGE_EMULATOR_HOST_GRPC", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CLOUDSDK_CONFIG", home)
	ctx := context.Background()

	out := stdout(t, func() {
		b, err := open(ctx, "gs://sluice-public-data?anonymous=true")
		if err != nil {
			t.Errorf("anonymous: %v", err)
			return
		}
		b.Close()
	})
	if out != "" {
		t.Errorf("anonymous: printed %q", out)
	}

	var err error
	out = stdout(t, func() {
		r := storage.NewResolver(storage.Options{})
		defer r.Close()
		_, err = r.Resolve(ctx, "gs://sluice-private-data/train/", nil)
	})
	if out != "" {
		t.Errorf("no credentials: printed %q", out)
	}
	if err == nil {
		t.Skip("Google credentials were found (a metadata server?): nothing more to check")
	}
	if !strings.Contains(err.Error(), "no Google credentials") || !strings.Contains(err.Error(), "anonymous=true") {
		t.Errorf("no credentials: %v, want an error saying so and how to read a public bucket", err)
	}
	if errors.Is(err, storage.ErrNoDriver) {
		t.Errorf("no credentials: %v, reported as a missing driver", err)
	}
}
