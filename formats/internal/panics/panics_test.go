package panics

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
)

func recovered(fn func()) (e *Error) {
	defer func() {
		if r := recover(); r != nil {
			e = New(r)
		}
	}()
	fn()
	return nil
}

// A panic is named by its message where that says what is wrong, else by
// where in arrow-go it was raised.
func TestNew(t *testing.T) {
	mem := memory.NewGoAllocator()
	for _, c := range []struct {
		name string
		fn   func()
		want string
	}{
		{"map keys with a null", func() {
			keys := array.NewInt32Builder(mem)
			keys.AppendValues([]int32{1, 0}, []bool{true, false})
			k := keys.NewArray()
			items := array.NewInt32Builder(mem)
			items.AppendValues([]int32{1, 2}, nil)
			v := items.NewArray()
			mt := arrow.MapOf(arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int32)
			entries := array.NewData(mt.Elem(), 2, []*memory.Buffer{nil}, []arrow.ArrayData{k.Data(), v.Data()}, 0, 0)
			offsets := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes([]int32{0, 2}))
			array.MakeFromData(array.NewData(mt, 1, []*memory.Buffer{nil, offsets}, []arrow.ArrayData{entries}, 0, 0))
		}, "a map key is null"},
		{"levels past their bound", func() {
			out := file.ValidityBitmapInputOutput{ReadUpperBound: 1, ValidBits: make([]byte, 8)}
			file.DefLevelsToBitmap([]int16{1, 1, 1}, file.LevelInfo{DefLevel: 1}, &out)
		}, "corrupt definition or repetition levels"},
		{"elsewhere", func() {
			var m map[string]int
			m["x"] = 1
		}, "corrupt data"},
	} {
		e := recovered(c.fn)
		if e == nil || e.Cause != c.want || e.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.name, e, c.want)
		}
	}
}
