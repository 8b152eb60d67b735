package checkpoint_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/checkpoint/internal/storetest"
)

func allKeys(t *testing.T, b *blob.Bucket) []string {
	t.Helper()
	var keys []string
	it := b.List(nil)
	for {
		obj, err := it.Next(context.Background())
		if err == io.EOF {
			return keys
		}
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, obj.Key)
	}
}

func TestBucketLayout(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	s, err := checkpoint.OpenBucketStore(ctx, b, "jobs/ckpt")
	if err != nil {
		t.Fatal(err)
	}
	defer storetest.CloseStore(t, s)
	if err := s.Save(ctx, "llm-7b", 1200, 0, storetest.State(0, 2, 2)); err != nil {
		t.Fatal(err)
	}
	// No marker while a rank is missing.
	want := []string{"jobs/ckpt/llm-7b/00000000000000001200/rank-0.state"}
	if got := allKeys(t, b); !slices.Equal(got, want) {
		t.Fatalf("objects %q, want %q", got, want)
	}
	if err := s.Save(ctx, "llm-7b", 1200, 1, storetest.State(1, 2, 2)); err != nil {
		t.Fatal(err)
	}
	want = []string{
		"jobs/ckpt/llm-7b/00000000000000001200/COMPLETE",
		"jobs/ckpt/llm-7b/00000000000000001200/COMPLETE.claim",
		"jobs/ckpt/llm-7b/00000000000000001200/COMPLETE.summary",
		"jobs/ckpt/llm-7b/00000000000000001200/rank-0.state",
		"jobs/ckpt/llm-7b/00000000000000001200/rank-1.state",
	}
	if got := allKeys(t, b); !slices.Equal(got, want) {
		t.Fatalf("objects %q, want %q", got, want)
	}
	if m, _ := b.ReadAll(ctx, want[0]); string(m) != "2\n" {
		t.Fatalf("marker holds %q", m)
	}
	if err := s.Delete(ctx, "llm-7b", 1200); err != nil {
		t.Fatal(err)
	}
	if got := allKeys(t, b); len(got) != 0 {
		t.Fatalf("Delete left %q", got)
	}
}

func TestBucketMarker(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	s, err := checkpoint.OpenBucketStore(ctx, b, "")
	if err != nil {
		t.Fatal(err)
	}
	defer storetest.CloseStore(t, s)
	storetest.SaveStep(t, s, "r", 1, 2, 2, nil)
	storetest.SaveStep(t, s, "r", 2, 2, 2, nil)
	marker := "r/00000000000000000002/COMPLETE"

	// All ranks present but no marker: the last saver failed before
	// writing it. The step does not count.
	if err := b.Delete(ctx, marker); err != nil {
		t.Fatal(err)
	}
	_, err = s.LoadStep(ctx, "r", 2)
	storetest.WantErr(t, err, checkpoint.ErrIncomplete, "no completion marker")
	if latest, err := s.Latest(ctx, "r"); err != nil || latest != 1 {
		t.Fatalf("Latest = %d, %v; want 1", latest, err)
	}

	for content, says := range map[string]string{"x\n": "not a world size", "3\n": "marker says 3"} {
		if err := b.WriteAll(ctx, marker, []byte(content), nil); err != nil {
			t.Fatal(err)
		}
		_, err = s.LoadStep(ctx, "r", 2)
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Fatalf("marker %q: LoadStep gave %v", content, err)
		}
		if latest, err := s.Latest(ctx, "r"); err != nil || latest != 1 {
			t.Fatalf("marker %q: Latest = %d, %v; want 1", content, latest, err)
		}
		infos, err := s.List(ctx, "r")
		if err != nil || infos[1].Complete || !strings.Contains(infos[1].Reason, says) {
			t.Fatalf("marker %q: List gave %+v, %v", content, infos, err)
		}
	}

	// Objects the store did not write are ignored.
	for _, k := range []string{"r/README", "r/00000000000000000002/rank-01.state", "r/00000000000000000002/notes.txt", "r/12/rank-0.state"} {
		if err := b.WriteAll(ctx, k, []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.WriteAll(ctx, marker, []byte("2\n"), nil); err != nil {
		t.Fatal(err)
	}
	infos, err := s.List(ctx, "r")
	if err != nil || len(infos) != 2 || !infos[1].Complete || !slices.Equal(infos[1].Ranks, []int{0, 1}) {
		t.Fatalf("List with foreign objects: %+v, %v", infos, err)
	}
}

func TestBucketPrefixesAreSeparate(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	a, err := checkpoint.OpenBucketStore(ctx, b, "a/")
	if err != nil {
		t.Fatal(err)
	}
	defer storetest.CloseStore(t, a)
	ab, err := checkpoint.OpenBucketStore(ctx, b, "ab")
	if err != nil {
		t.Fatal(err)
	}
	defer storetest.CloseStore(t, ab)
	storetest.SaveStep(t, a, "r", 1, 1, 1, nil)
	if _, err := ab.Latest(ctx, "r"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("store at prefix ab sees prefix a: %v", err)
	}
	// Closing a store leaves the caller's bucket open.
	storetest.CloseStore(t, a)
	if _, err := b.ReadAll(ctx, "a/r/00000000000000000001/rank-0.state"); err != nil {
		t.Fatalf("bucket unusable after the store closed: %v", err)
	}
}

func TestOpenBucketStoreURL(t *testing.T) {
	ctx := context.Background()
	s, err := checkpoint.OpenBucketStoreURL(ctx, "mem://?prefix=ckpt/")
	if err != nil {
		t.Fatal(err)
	}
	storetest.SaveStep(t, s, "r", 3, 1, 1, nil)
	if latest, err := s.Latest(ctx, "r"); err != nil || latest != 3 {
		t.Fatalf("Latest = %d, %v", latest, err)
	}
	storetest.CloseStore(t, s)
	if _, _, owned := checkpoint.BucketInternals(s); !owned {
		t.Fatal("the store does not own the bucket it opened")
	}

	const secretURL = "nosuch://user:hunter2@bucket/path?token=s3cr3t"
	_, err = checkpoint.OpenBucketStoreURL(ctx, secretURL)
	if err == nil {
		t.Fatal("unknown scheme accepted")
	}
	if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("error shows credentials: %v", err)
	}
	if !strings.Contains(err.Error(), "nosuch://bucket/path") {
		t.Fatalf("error does not name the bucket: %v", err)
	}
}

// TestBucketMarkerIncarnation: a step's marker names the incarnation whose
// saver found every rank there, and a step counts only as that
// incarnation's.
func TestBucketMarkerIncarnation(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	s, err := checkpoint.OpenBucketStore(ctx, b, "")
	if err != nil {
		t.Fatal(err)
	}
	defer storetest.CloseStore(t, s)
	storetest.SaveStep(t, s, "r", 1, 2, 2, func(st *checkpoint.State) { st.Incarnation = "job-1" })
	marker := "r/00000000000000000001/COMPLETE"
	if m, _ := b.ReadAll(ctx, marker); string(m) != "2 job-1\n" {
		t.Fatalf("marker holds %q", m)
	}
	for content, says := range map[string]string{
		"2 job-0\n":   `marker is incarnation "job-0"'s`,
		"2 a b\n":     "not a world size",
		"2 caf\xc3\n": "not a world size",
	} {
		if err := b.WriteAll(ctx, marker, []byte(content), nil); err != nil {
			t.Fatal(err)
		}
		_, err = s.LoadStep(ctx, "r", 1)
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Fatalf("marker %q: LoadStep gave %v", content, err)
		}
	}
}
