package storage_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	oldstorage "github.com/sluicedata/sluice/formats/storage"
	_ "github.com/sluicedata/sluice/formats/storage/azure"
	_ "github.com/sluicedata/sluice/formats/storage/gcs"
	_ "github.com/sluicedata/sluice/formats/storage/s3"
	"github.com/sluicedata/sluice/storage"
)

// A program written against the old path still reads through it: its names
// are the new package's, down to the sentinels errors.Is compares.
func TestOldPathReads(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.csv"), []byte("x\n1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var r *storage.Resolver = oldstorage.NewResolver(oldstorage.Options{})
	defer r.Close()
	srcs, err := r.Resolve(ctx, "file://"+filepath.ToSlash(dir)+"/", nil)
	if err != nil || len(srcs) != 1 {
		t.Fatalf("Resolve = %v, %v; want the one file", srcs, err)
	}
	b, err := io.ReadAll(srcs[0].ReaderAt(ctx))
	if err != nil || string(b) != "x\n1\n" {
		t.Fatalf("read %q, %v", b, err)
	}
	_, err = r.Resolve(ctx, filepath.Join(dir, "missing.csv"), nil)
	if !errors.Is(err, oldstorage.ErrNotFound) || !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("missing file: %v, want ErrNotFound under both names", err)
	}
}

// The old driver paths, imported for their side effect as before, still
// link the drivers: their schemes open instead of failing for want of one.
func TestOldDriverPathsRegister(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("AZURE_STORAGE_ACCOUNT", "sluicetest")
	for _, u := range []string{"s3://bucket?region=us-east-1", "gs://bucket?anonymous=true", "azblob://container"} {
		b, err := storage.OpenBucket(context.Background(), u)
		if errors.Is(err, storage.ErrNoDriver) {
			t.Errorf("%s: %v: the old import path registered no driver", u, err)
		}
		if err == nil {
			b.Close()
		}
	}
}
