package parquet

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/variant"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/internal/corpus"
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
	_, err := checkBatch(batch(), 10, ErrorOnInvalidUTF8, mem)
	if !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), `column "s" row 12`) {
		t.Errorf("default: err = %v", err)
	}
	out, err := checkBatch(batch(), 0, ReplaceInvalidUTF8, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	col := out.Column(0).(*array.String)
	if col.Value(0) != "ok" || !col.IsNull(1) || col.Value(2) != "caf\uFFFD!" {
		t.Errorf("replaced: %v", col)
	}
}
