package pebblestore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/checkpoint/internal/storetest"
)

// TestStore runs checkpoint's store suite against a Store, so that it keeps
// the contract every store keeps.
func TestStore(t *testing.T) {
	storetest.Store(t, func(t *testing.T) (checkpoint.Store, checkpoint.Backend, checkpoint.Layout) {
		s := openTemp(t)
		return s, s.backend, layout{}
	})
}

// TestBackend holds the backend to checkpoint.Backend's contract. It is a
// store's, so that the store's Close in the cleanup fails if a listing left
// an iterator open.
func TestBackend(t *testing.T) {
	storetest.Backend(t, func(t *testing.T) checkpoint.Backend { return openTemp(t).backend })
}

// openTemp opens a store in a fresh directory, closed when the test ends.
func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { storetest.CloseStore(t, s) })
	return s
}

// TestOldLayout writes states under keys spelled out as checkpoint's pebble
// store wrote them before the backends were split out (and before this
// package was split out of checkpoint), and reads them through a Store:
// directories written by an older sluice must stay resumable.
func TestOldLayout(t *testing.T) {
	s := openTemp(t)
	storetest.OldLayout(t, s, func(step int64, rank int, value []byte) {
		// "c\x00" run "\x00", step as 8 bytes and rank as 4, big-endian.
		key := "c\x00r\x00" + string([]byte{0, 0, 0, 0, 0, 0, 0, byte(step)}) + string([]byte{0, 0, 0, byte(rank)})
		if err := s.backend.db.Set([]byte(key), value, nil); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLockSameProcess(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, Options{})
	storetest.WantErr(t, err, ErrInUse, dir, "in use", "held by another process")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing released the lock.
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatalf("reopen after Close: %v", err)
	}
	storetest.CloseStore(t, s)
}

// TestLockOtherProcess starts this test binary again as a helper that
// holds the store open (see TestMain), as a second job on the same machine
// would.
func TestLockOtherProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("helper: %v", err)
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}
	_, err = Open(dir, Options{})
	storetest.WantErr(t, err, ErrInUse, dir, "in use", "held by another process")
	t.Log(err)
}

func TestReopenKeepsStates(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	states := storetest.SaveStep(t, s, "r", 5, 2, 4, nil)
	storetest.CloseStore(t, s)
	s, err = Open(dir, Options{ErrorIfNotExists: true, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer storetest.CloseStore(t, s)
	got, err := s.Load(ctx, "r", 5, 1)
	if err != nil || !reflect.DeepEqual(got, states[1]) {
		t.Fatalf("Load after reopen: %+v, %v", got, err)
	}
	if err := s.Save(ctx, "r", 6, 0, states[0]); err == nil {
		t.Fatal("Save on a read-only store succeeded")
	}
}

func TestOpenErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	_, err := Open(missing, Options{ErrorIfNotExists: true})
	storetest.WantErr(t, err, checkpoint.ErrNotFound, missing)
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ErrorIfNotExists created the directory: %v", err)
	}
	empty := t.TempDir()
	_, err = Open(empty, Options{ErrorIfNotExists: true})
	storetest.WantErr(t, err, checkpoint.ErrNotFound, empty)
	if _, err := Open("", Options{}); err == nil {
		t.Fatal("empty directory name accepted")
	}
	// A failed open must not leave the directory locked.
	s, err := Open(empty, Options{})
	if err != nil {
		t.Fatal(err)
	}
	storetest.CloseStore(t, s)
}

func TestKeyOrder(t *testing.T) {
	type k struct {
		run  string
		step int64
		rank int
	}
	// Listed in the order their keys must sort.
	keys := []k{
		{"a", 0, 0}, {"a", 0, 1}, {"a", 0, 256}, {"a", 1, 0}, {"a", 255, 0}, {"a", 256, 0},
		{"a", 1 << 40, 0}, {"a", 1<<63 - 1, 1<<31 - 1}, {"a b", 0, 0}, {"ab", 0, 0}, {"b", 0, 0},
	}
	var l layout
	for i := 1; i < len(keys); i++ {
		a, b := keys[i-1], keys[i]
		if strings.Compare(l.RankKey(a.run, a.step, a.rank), l.RankKey(b.run, b.step, b.rank)) >= 0 {
			t.Errorf("key of %+v does not sort before key of %+v", a, b)
		}
	}
	if end := prefixEnd([]byte{1, 0xff, 0xff}); !bytes.Equal(end, []byte{2}) {
		t.Errorf("prefixEnd = %x", end)
	}
}

func TestKV(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer storetest.CloseStore(t, s)
	plans, err := s.KV("plans")
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.KV("plans2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.KV("a\x00b"); err == nil {
		t.Fatal("namespace with NUL accepted")
	}
	if err := plans.Set(ctx, []byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := other.Set(ctx, []byte("k"), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	storetest.SaveStep(t, s, "plans", 1, 1, 1, nil) // a run named like the namespace
	if v, err := plans.Get(ctx, []byte("k")); err != nil || string(v) != "v1" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if steps, _ := storetest.ListSteps(t, s, "plans"); !slices.Equal(steps, []int64{1}) {
		t.Fatalf("namespace data shows as steps %v", steps)
	}
	if err := plans.Delete(ctx, []byte("k")); err != nil {
		t.Fatal(err)
	}
	_, err = plans.Get(ctx, []byte("k"))
	storetest.WantErr(t, err, checkpoint.ErrNotFound, `namespace "plans"`)
	if v, err := other.Get(ctx, []byte("k")); err != nil || string(v) != "v2" {
		t.Fatalf("other namespace: %q, %v", v, err)
	}
}

func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	var lockedBuf = &syncWriter{w: &buf}
	s, err := Open(t.TempDir(), Options{Logger: slogTo(lockedBuf)})
	if err != nil {
		t.Fatal(err)
	}
	storetest.SaveStep(t, s, "r", 1, 1, 1, nil)
	storetest.CloseStore(t, s)
	if !strings.Contains(lockedBuf.String(), "component=pebble") {
		t.Fatalf("no pebble messages reached the logger: %q", lockedBuf.String())
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), "boom") {
				t.Fatalf("Fatalf recovered %v", r)
			}
		}()
		pebbleLogger{}.Fatalf("boom %d", 1)
	}()
}

func BenchmarkSave(b *testing.B) {
	ctx := context.Background()
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	st := storetest.RealisticState()
	enc, _ := checkpoint.Encode(st)
	b.ReportAllocs()
	step := int64(0)
	for b.Loop() {
		if err := s.Save(ctx, "bench", step, st.Rank, st); err != nil {
			b.Fatal(err)
		}
		step++
	}
	b.ReportMetric(float64(len(enc)), "state-bytes")
}

var _ io.Writer = (*syncWriter)(nil)

// syncWriter lets pebble's background goroutines and the test share a
// buffer.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
