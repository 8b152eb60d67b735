package checkpoint

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
)

func TestPebbleLockSameProcess(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenPebble(dir, PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenPebble(dir, PebbleOptions{})
	wantErr(t, err, ErrInUse, dir, "in use", "held by another process")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing released the lock.
	s, err = OpenPebble(dir, PebbleOptions{})
	if err != nil {
		t.Fatalf("reopen after Close: %v", err)
	}
	closeStore(t, s)
}

// TestPebbleLockOtherProcess starts this test binary again as a helper that
// holds the store open (see TestMain), as a second job on the same machine
// would.
func TestPebbleLockOtherProcess(t *testing.T) {
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
	_, err = OpenPebble(dir, PebbleOptions{})
	wantErr(t, err, ErrInUse, dir, "in use", "held by another process")
	t.Log(err)
}

func TestPebbleReopenKeepsStates(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenPebble(dir, PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	states := saveStep(t, s, "r", 5, 2, 4, nil)
	closeStore(t, s)
	s, err = OpenPebble(dir, PebbleOptions{ErrorIfNotExists: true, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, s)
	got, err := s.Load(ctx, "r", 5, 1)
	if err != nil || !reflect.DeepEqual(got, states[1]) {
		t.Fatalf("Load after reopen: %+v, %v", got, err)
	}
	if err := s.Save(ctx, "r", 6, 0, states[0]); err == nil {
		t.Fatal("Save on a read-only store succeeded")
	}
}

func TestPebbleOpenErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	_, err := OpenPebble(missing, PebbleOptions{ErrorIfNotExists: true})
	wantErr(t, err, ErrNotFound, missing)
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ErrorIfNotExists created the directory: %v", err)
	}
	empty := t.TempDir()
	_, err = OpenPebble(empty, PebbleOptions{ErrorIfNotExists: true})
	wantErr(t, err, ErrNotFound, empty)
	if _, err := OpenPebble("", PebbleOptions{}); err == nil {
		t.Fatal("empty directory name accepted")
	}
	// A failed open must not leave the directory locked.
	s, err := OpenPebble(empty, PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	closeStore(t, s)
}

func TestPebbleKeyOrder(t *testing.T) {
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
	var l pebbleLayout
	for i := 1; i < len(keys); i++ {
		a, b := keys[i-1], keys[i]
		if strings.Compare(l.rankKey(a.run, a.step, a.rank), l.rankKey(b.run, b.step, b.rank)) >= 0 {
			t.Errorf("key of %+v does not sort before key of %+v", a, b)
		}
	}
	if end := prefixEnd([]byte{1, 0xff, 0xff}); !bytes.Equal(end, []byte{2}) {
		t.Errorf("prefixEnd = %x", end)
	}
}

func TestPebbleKV(t *testing.T) {
	ctx := context.Background()
	s, err := OpenPebble(t.TempDir(), PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, s)
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
	saveStep(t, s, "plans", 1, 1, 1, nil) // a run named like the namespace
	if v, err := plans.Get(ctx, []byte("k")); err != nil || string(v) != "v1" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if steps, _ := listSteps(t, s, "plans"); !slices.Equal(steps, []int64{1}) {
		t.Fatalf("namespace data shows as steps %v", steps)
	}
	if err := plans.Delete(ctx, []byte("k")); err != nil {
		t.Fatal(err)
	}
	_, err = plans.Get(ctx, []byte("k"))
	wantErr(t, err, ErrNotFound, `namespace "plans"`)
	if v, err := other.Get(ctx, []byte("k")); err != nil || string(v) != "v2" {
		t.Fatalf("other namespace: %q, %v", v, err)
	}
}

func TestPebbleLogger(t *testing.T) {
	var buf bytes.Buffer
	var lockedBuf = &syncWriter{w: &buf}
	s, err := OpenPebble(t.TempDir(), PebbleOptions{Logger: slogTo(lockedBuf)})
	if err != nil {
		t.Fatal(err)
	}
	saveStep(t, s, "r", 1, 1, 1, nil)
	closeStore(t, s)
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

// realisticState is what a rank of a 64-split job saves: 64 cursors, a
// column projection and hashes as long as a stream writes them.
func realisticState() State {
	st := testState(3, 8, 64)
	st.Columns = []string{"input_ids", "attention_mask", "labels", "source", "lang", "score"}
	st.Plan = strings.Repeat("9f", 32)
	st.Fingerprint = st.OrderFingerprint()
	for i := range st.Cursors {
		st.Cursors[i] = Cursor{Window: 1200 + i, Offset: 70000 + int64(i), Rows: 12_345_678 + int64(i)}
	}
	return st
}

func BenchmarkPebbleSave(b *testing.B) {
	ctx := context.Background()
	s, err := OpenPebble(b.TempDir(), PebbleOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	st := realisticState()
	enc, _ := Encode(st)
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

func BenchmarkEncode(b *testing.B) {
	st := realisticState()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(st); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	enc, err := Encode(realisticState())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(enc); err != nil {
			b.Fatal(err)
		}
	}
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
