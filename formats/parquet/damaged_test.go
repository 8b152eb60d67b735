package parquet_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/internal/panics"
	"github.com/sluicedata/sluice/internal/testkit/corpus"
)

// damaged are real files (parquet-testing's) with a few bytes changed, as
// a random mutation of the files changed them, on each of which arrow-go
// panicked; was is the error a read ended with. Now the page checks refuse
// the page before arrow-go reads it, saying what is wrong with it and
// where, and the panics no check foresees (it would have to decode the
// levels) are named by what they tell of the file.
var damaged = []struct {
	file  string
	bytes [][2]int // offset, new value
	was   string   // the error before the checks
	want  string
	// panicked: arrow-go still panics on it.
	panicked bool
}{
	{"unknown-logical-type.parquet", [][2]int{{54, 185}},
		`column "column with known type": the decoder failed: runtime error: invalid memory address or nil pointer dereference`,
		`row group 0: corrupt or unreadable file: column "column with known type": corrupt page at byte 48: a data page without its data page header`, false},
	{"repeated_primitive_no_list.parquet", [][2]int{{1189, 56}, {304, 237}, {50, 251}, {916, 148}},
		`column "group_of_lists.String_list_in_group": the decoder failed: runtime error: makeslice: len out of range`,
		`row group 0: corrupt or unreadable file: column "group_of_lists.String_list_in_group": corrupt page at byte 471: dictionary-encoded values before the chunk's dictionary page`, false},
	{"nested_maps.snappy.parquet", [][2]int{{410, 227}, {1230, 85}, {302, 94}, {321, 20}},
		`column "a.key_value.key": the decoder failed: dictionary decoding unimplemented for bool`,
		`row group 0: corrupt or unreadable file: column "a.key_value.value": corrupt page at byte 73: a dictionary of BOOLEAN values`, false},
	{"rle_boolean_encoding.parquet", [][2]int{{7, 10}},
		`column "datatype_boolean": the decoder failed: runtime error: slice bounds out of range [13:5]`,
		`row group 0: corrupt or unreadable file: column "datatype_boolean": corrupt page at byte 4: levels of 2+11 bytes in a page of 5`, false},
	{"delta_encoding_optional_column.parquet", [][2]int{{9700, 0}, {5565, 16}},
		`column "c_birth_year": the decoder failed: unimplemented encoding type`,
		`row group 0: corrupt or unreadable file: column "c_birth_year": corrupt page at byte 2007: BOOLEAN values in DELTA_BINARY_PACKED, which is not an encoding for them`, false},
	{"nullable.impala.parquet", [][2]int{{3056, 59}, {753, 155}, {2710, 231}},
		`column "nested_struct.C.d.list.element.list.element.E": the decoder failed: values read exceeded upper bound`,
		`row group 0: corrupt or unreadable file: column "nested_struct.C.d.list.element.list.element.E": corrupt definition or repetition levels`, true},
	{"repeated_no_annotation.parquet", [][2]int{{547, 148}, {192, 30}, {202, 192}, {161, 76}},
		`one of the columns: the decoder failed: arrow/array: mismatch number of rows in column "phoneNumbers": got=2, want=3`,
		`row group 0: corrupt or unreadable file: columns that disagree on the number of rows`, false}, // flatdecode reads the flat column, which holds the rows: arrow-go's nested one ends early and does not get to panic
}

func TestDamagedFilesSayWhatIsWrong(t *testing.T) {
	sharedTestdata := corpus.Dir(t)
	for _, c := range damaged {
		t.Run(c.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(sharedTestdata, "parquet-testing/data", c.file))
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range c.bytes {
				data[b[0]] = byte(b[1])
			}
			url := "mem://fuzz/damaged-" + c.file
			err = withDeadline(t, url, 10*time.Second, func(ctx context.Context) error {
				return planAndReadBytes(ctx, url, data)
			})
			if err == nil {
				t.Fatal("read without an error")
			}
			msg := err.Error()
			if !strings.Contains(msg, url) || !strings.Contains(msg, c.want) || !errors.Is(err, formats.ErrCorrupt) {
				t.Fatalf("err = %v\nwant ErrCorrupt naming the file and saying %q", err, c.want)
			}
			if pe := (*panics.Error)(nil); errors.As(err, &pe) != c.panicked {
				t.Errorf("arrow-go panicked: %v, want %v", errors.As(err, &pe), c.panicked)
			}
			for _, bad := range []string{"runtime error", "decoder failed", "tried reading from file"} {
				if strings.Contains(msg, bad) {
					t.Errorf("err = %v: says %q", err, bad)
				}
			}
		})
	}
}
