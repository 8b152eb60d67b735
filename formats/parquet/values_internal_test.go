package parquet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/variant"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/internal/testkit/corpus"
)

// FuzzCheckVariant checks arbitrary VARIANT bytes as reads do: it must
// return (no panic escapes, no hang on forged counts or shared offsets).
func FuzzCheckVariant(f *testing.F) {
	// The Parquet project's VARIANT test values, when the corpus is there.
	shared, _ := corpus.Lookup(f)
	names, _ := filepath.Glob(filepath.Join(shared, "parquet-testing", "variant", "*.value"))
	for _, v := range names {
		value, err1 := os.ReadFile(v)
		meta, err2 := os.ReadFile(strings.TrimSuffix(v, ".value") + ".metadata")
		if err1 == nil && err2 == nil {
			f.Add(meta, value)
		}
	}
	f.Add([]byte{1, 0, 0}, []byte{0x03, 0x00, 0x00})
	f.Fuzz(func(t *testing.T, meta, value []byte) {
		v, err := func() (v variant.Value, err error) {
			defer func() {
				if recover() != nil {
					err = errors.New("panicked")
				}
			}()
			return variant.New(meta, value)
		}()
		if err != nil {
			return
		}
		budget := len(v.Bytes()) + 1
		_ = checkVariant(v, 0, &budget)
	})
}

// Under ReplaceInvalidUTF8 a bad string is repaired and the batch's memory
// accounted; under the default it is an error naming column and row.
func TestCheckBatchUTF8(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	batch := func() arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, schema)
		defer b.Release()
		sb := b.Field(0).(*array.StringBuilder)
		sb.Append("ok")
		sb.AppendNull()
		sb.Append("caf\xe9!")
		return b.NewRecordBatch()
	}
	_, err := checkBatch(batch(), 10, ErrorOnInvalidUTF8, mem, nil)
	if !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), `column "s" row 12`) {
		t.Errorf("default: err = %v", err)
	}
	out, err := checkBatch(batch(), 0, ReplaceInvalidUTF8, mem, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	col := out.Column(0).(*array.String)
	if col.Value(0) != "ok" || !col.IsNull(1) || col.Value(2) != "caf\uFFFD!" {
		t.Errorf("replaced: %v", col)
	}
}

// checkValues finds a string array's bad row in bulk (allUTF8) and then
// value by value: it must name the same row with the same reason as the
// value-by-value loop alone, over strings cut anywhere inside multi-byte
// characters, nulls, empty values and slices.
func TestCheckValuesBulkUTF8(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	pieces := []string{"a", "é", "€", "😀", "\xe9", "\x80", "\xf0\x9f", "", "abc", "\xc3", "\xa9"}
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 3000 {
		sb := array.NewStringBuilder(mem)
		n := 1 + r.IntN(8)
		if trial%2 == 0 {
			// Valid text cut at any bytes: together the values are valid
			// UTF-8 where a cut falls between characters or not.
			var text strings.Builder
			for range 3 * n {
				text.WriteString(pieces[r.IntN(4)])
			}
			rest := text.String()
			for i := range n {
				k := len(rest)
				if i < n-1 {
					k = r.IntN(len(rest) + 1)
				}
				sb.Append(rest[:k])
				rest = rest[k:]
			}
		}
		for range n {
			if trial%2 == 0 {
				break
			}
			if r.IntN(5) == 0 {
				sb.AppendNull()
				continue
			}
			var s strings.Builder
			for range r.IntN(4) {
				// Mostly valid pieces, so that a bad one is rare.
				p := pieces[r.IntN(4)]
				if r.IntN(6) == 0 {
					p = pieces[r.IntN(len(pieces))]
				}
				s.WriteString(p)
			}
			sb.Append(s.String())
		}
		full := sb.NewStringArray()
		sb.Release()
		off := r.IntN(n)
		a := array.NewSlice(full, int64(off), int64(off+r.IntN(n-off+1))).(*array.String)
		full.Release()
		wantRow, wantErr := firstInvalid(a)
		gotRow, gotErr := checkValues(a)
		if gotRow != wantRow || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("trial %d: %q: bulk (%d, %v), one by one (%d, %v)", trial, a, gotRow, gotErr, wantRow, wantErr)
		}
		if wantErr == nil && a.Len() > 0 && !allUTF8(a.ValueOffsets(), a.ValueBytes()) {
			t.Fatalf("trial %d: %q: valid values the bulk check refuses", trial, a)
		}
		a.Release()
	}
}
