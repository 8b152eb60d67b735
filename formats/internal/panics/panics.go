// Package panics says what a panic of a third-party decoder (arrow-go's,
// mostly) tells of the file it was decoding: "runtime error: invalid memory
// address or nil pointer dereference" is not something a user can act on,
// "corrupt definition or repetition levels" is.
package panics

import (
	"fmt"
	"runtime"
	"strings"
)

// byMessage are panics whose message says what is wrong, in arrow-go's
// words for a developer.
var byMessage = []struct{ has, cause string }{
	{"map array keys array should have no nulls", "a map key is null"},
	{"map array child array should have no nulls", "a map entry is null"},
	{"mismatch number of rows in column", "columns that disagree on the number of rows"},
}

// byPlace are the places in arrow-go where a decoder panics, by source
// path, and what a panic there says of the file. The innermost that
// matches decides: generic helpers (bit readers, run-length decoders)
// match none, so their callers do.
var byPlace = []struct{ path, cause string }{
	{"/parquet/file/level_conversion.go", "corrupt definition or repetition levels"},
	{"/parquet/internal/encoding/levels.go", "corrupt definition or repetition levels"},
	{"/parquet/file/page_reader.go", "a corrupt page header"},
	{"/internal/utils/buf_reader.go", "a corrupt page header"},
	{"/parquet/compress/", "a corrupt compressed page"},
	{"/parquet/internal/encoding/", "corrupt encoded values"},
	{"/parquet/variant/", "a malformed VARIANT value"},
	{"/parquet/pqarrow/", "nested values that do not match the schema"},
	{"/arrow/array/", "values that do not match the schema"},
	{"/arrow/compute/", "values that do not match the schema"},
}

// Error is a decoder's panic as an error: its message says what the panic
// tells of the data (see New); tests find panics by its type.
type Error struct {
	Cause string
	Value any // what the decoder panicked with
}

func (e *Error) Error() string { return e.Cause }

// New returns the panic r as an error. Call it in the deferred function
// that recovered r: the panicking frames are still on the stack there, and
// where the panic was raised is what says most.
func New(r any) *Error {
	return &Error{Cause: cause(r), Value: r}
}

func cause(r any) string {
	msg := fmt.Sprint(r)
	for _, m := range byMessage {
		if strings.Contains(msg, m.has) {
			return m.cause
		}
	}
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		if strings.Contains(f.File, "/apache/arrow-go/") {
			for _, p := range byPlace {
				if strings.Contains(f.File, p.path) {
					return p.cause
				}
			}
		}
		if !more {
			return "corrupt data"
		}
	}
}
