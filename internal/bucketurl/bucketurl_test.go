package bucketurl

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
)

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
// own opener prints a warning to standard output).
func TestGCSWithoutCredentials(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("STORAGE_EMULATOR_HOST_GRPC", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CLOUDSDK_CONFIG", home)
	ctx := context.Background()

	out := stdout(t, func() {
		b, err := Open(ctx, "gs://sluice-public-data?anonymous=true")
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
	out = stdout(t, func() { _, err = Open(ctx, "gs://sluice-private-data") })
	if out != "" {
		t.Errorf("no credentials: printed %q", out)
	}
	if err == nil {
		t.Skip("Google credentials were found (a metadata server?): nothing more to check")
	}
	if !strings.Contains(err.Error(), "no Google credentials") || !strings.Contains(err.Error(), "anonymous=true") {
		t.Errorf("no credentials: %v, want an error saying so and how to read a public bucket", err)
	}
}
