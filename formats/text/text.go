// Package text is sluice's driver for text formats: CSV and TSV, JSON Lines
// (one object a line) and JSON files holding one top-level array of
// objects (or objects one after another), each plain or compressed with
// gzip (.gz) or zstd (.zst).
//
// One package holds them all because they share everything but the
// tokenizer: the byte-range units, the sample a schema is inferred from,
// how bad rows are reported or skipped, the counting pass and the source
// that refills a buffer from a file or a decompressor.
//
// An uncompressed CSV or JSON Lines file is cut into units of about
// Options.UnitBytes at record boundaries: a unit owns the records that
// start inside its byte range, and reads past its end only to finish the
// record that straddles it. A compressed file, a JSON file and a CSV file
// whose sample holds a quoted newline are read whole, as one unit.
//
// Row counts are unknown (-1) unless Options.Count asks for a counting pass
// at plan time, kept in the plan cache.
package text

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/formats"
)

// Kind is a text format.
type Kind int

const (
	// CSV is comma-separated values (.csv), or any delimiter set in Options.
	CSV Kind = iota
	// TSV is CSV with a tab delimiter (.tsv, .tab).
	TSV
	// JSONLines is one JSON object a line (.jsonl, .ndjson).
	JSONLines
	// JSON is a file holding one top-level array of objects, or objects one
	// after another (.json).
	JSON
)

func (k Kind) String() string {
	switch k {
	case CSV:
		return "csv"
	case TSV:
		return "tsv"
	case JSONLines:
		return "jsonl"
	case JSON:
		return "json"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

func (k Kind) extensions() []string {
	switch k {
	case CSV:
		return []string{".csv"}
	case TSV:
		return []string{".tsv", ".tab"}
	case JSONLines:
		return []string{".jsonl", ".ndjson"}
	case JSON:
		return []string{".json"}
	}
	return nil
}

// BadRows says what a row whose values do not fit the schema does.
type BadRows int

const (
	// BadRowsError (the default) fails the read with an error naming the
	// file, the line or record and the byte offset.
	BadRowsError BadRows = iota
	// BadRowsSkip leaves the row out and counts it (Format.SkippedRows).
	// Which rows are skipped depends on the data only, so exactly-once
	// holds for every good row.
	BadRowsSkip
)

// Options configure a text format. The zero value is a usable default for
// every field.
type Options struct {
	// Delimiter separates CSV fields. Default: detected per file as
	// DuckDB's sniffer does (see Dialect and docs/formats.md): ',', '|',
	// ';' or tab, the one that cuts the head's rows alike into the most
	// fields. TSV: '\t', never detected. A delimiter given is always used.
	Delimiter byte
	// Quote encloses CSV fields that hold delimiters, quotes or newlines.
	// Default: detected per file, '"', '\'' or none (a file whose quotes do
	// not close, or close before a stray byte, as DuckDB finds); '"' where
	// the head holds no quote. NoQuote turns quoting off.
	Quote   byte
	NoQuote bool
	// Escape, inside a quoted field, makes the next byte literal. Default:
	// detected per file, 0 (a quote is escaped by doubling it, RFC 4180),
	// '\\', or the other quote character. Escape equal to Quote is doubling.
	Escape byte
	// Comment starts a comment: a line it starts (after spaces at most) is
	// skipped, and outside quotes it ends a record. Default: detected per
	// file, none or '#' where lines start with it as DuckDB's sniffer
	// requires (at least one full-line comment; three in five lines holding
	// it fit the file's field count). NoComment turns comments off.
	Comment   byte
	NoComment bool
	// NoHeader says the first CSV record is data: columns are named
	// column0, column1, ... (zero-padded as DuckDB names them: column00 to
	// column10 for 11 columns). Header says the first record names the
	// columns. Default (neither): detected per file, as DuckDB does: the
	// first record (after the lines detection skips as a preamble) is data
	// if each of its values fits the type of its column in the records
	// below it and not every column is text; a one-record file is a
	// header only if every value of it is text. Setting both is an error.
	NoHeader bool
	Header   bool
	// NullStrings are the unquoted CSV values read as null. Default: the
	// empty field only. A quoted value is never null.
	NullStrings []string
	// NullPadding reads a CSV record with fewer fields than the header as
	// if its missing last values were null, as DuckDB's null_padding does;
	// dialect detection then takes a record shorter than the first as
	// consistent with it. A record with more fields than the header is
	// always an error. Default false: a short record is a bad row.
	NullPadding bool

	// ReplaceInvalidUTF8 reads a CSV string value or header name, or a
	// JSON string or key, that is not UTF-8 with each run of invalid bytes
	// replaced by one U+FFFD (as Parquet's ReplaceInvalidUTF8 does).
	// Default false: such a value (or JSON record) is a bad row, naming
	// the byte, and such a CSV header name fails the file, naming the
	// column's position; a sampled JSON record with such bytes has no say
	// in the types.
	ReplaceInvalidUTF8 bool

	// Schema, if set, gives the columns' types (by name for CSV with a
	// header and JSON, by position for CSV without one) and no sample is
	// inferred. A field whose type the driver cannot parse is an error.
	Schema *arrow.Schema
	// SampleRecords is how many records at the head of a file types are
	// inferred from. The files that give the types (SampleFiles) are also
	// sampled in 8 stretches of 256 KiB spread over the rest of the file
	// (plain CSV and JSON Lines, and .json), at most 2 MiB more a file, so
	// that a column that changes past the head is widened. Default 1000.
	SampleRecords int
	// SampleFiles is how many of the first files types are inferred from,
	// widened across them (an integer column that is a float in another
	// file is a float). Later files are read with that schema. Default 4.
	SampleFiles int
	// WidenToString lets a column whose inferred types conflict across the
	// sampled files (an integer in one, text in another) be a string
	// column. Default false: such a conflict is an ErrSchema error.
	WidenToString bool
	// BadRows says what a row that does not fit the schema does. Default
	// BadRowsError.
	BadRows BadRows

	// UnitBytes is the size of the byte ranges an uncompressed CSV or JSON
	// Lines file is cut into. Default 8 MiB.
	UnitBytes int64
	// Count runs a counting pass at plan time so that every unit's rows
	// are known (DropRemainder needs them). It reads every file once: for
	// JSON Lines and CSV it finds record boundaries only (a quote-aware
	// scan, no value parsing); with BadRowsSkip, or for JSON, it parses
	// every value. The counts are kept in the plan cache, keyed by the
	// file's size, modification time and ETag. Default false: counts are
	// unknown (-1).
	Count bool
}

func (o Options) withDefaults(k Kind) Options {
	if o.Delimiter == 0 {
		o.Delimiter = ','
		if k == TSV {
			o.Delimiter = '\t'
		}
	}
	if o.Quote == 0 {
		o.Quote = '"'
	}
	if o.NoQuote {
		o.Quote = 0
	}
	if o.NullStrings == nil {
		o.NullStrings = []string{""}
	}
	if o.SampleRecords <= 0 {
		o.SampleRecords = 1000
	}
	if o.SampleFiles <= 0 {
		o.SampleFiles = 4
	}
	if o.UnitBytes <= 0 {
		o.UnitBytes = 8 << 20
	}
	return o
}

// DialectByte reads a dialect option given as text, as the CLI's flags and
// the Python options give them: "" leaves it to detection, one byte is that
// byte, and "none", where off is allowed (quote, comment), turns it off.
func DialectByte(v string, offAllowed bool) (b byte, off bool, err error) {
	switch {
	case v == "":
		return 0, false, nil
	case v == "none" && offAllowed:
		return 0, true, nil
	case len(v) != 1:
		if offAllowed {
			return 0, false, fmt.Errorf("%q is neither one byte nor none", v)
		}
		return 0, false, fmt.Errorf("%q is more than one byte", v)
	}
	return v[0], false, nil
}

// Format is one text format, a formats.Format driver. Create it with New;
// it is safe for concurrent use.
type Format struct {
	kind Kind
	opts Options
	// given is opts as the user gave them: what is zero there is detected.
	given   Options
	skipped atomic.Int64
}

// New returns the driver for kind with opts.
func New(kind Kind, opts Options) *Format {
	return &Format{kind: kind, opts: opts.withDefaults(kind), given: opts}
}

// All returns drivers for every text kind with the same options, for a
// dataset of mixed text files.
func All(opts Options) []formats.Format {
	return []formats.Format{New(CSV, opts), New(TSV, opts), New(JSONLines, opts), New(JSON, opts)}
}

// WithReplaceInvalidUTF8 is a driver like f whose Options.ReplaceInvalidUTF8
// is set, for a caller (sluice cat --invalid-utf8 replace) that holds
// drivers built elsewhere.
func (f *Format) WithReplaceInvalidUTF8() *Format {
	o := f.given
	o.ReplaceInvalidUTF8 = true
	return New(f.kind, o)
}

// Name is the kind's name: "csv", "tsv", "jsonl" or "json".
func (f *Format) Name() string { return f.kind.String() }

// SkippedRows is how many rows BadRowsSkip has left out so far, over every
// read through this driver (a counting pass included).
func (f *Format) SkippedRows() int64 { return f.skipped.Load() }

// compression is how a file's bytes are stored.
type compression int

const (
	plain compression = iota
	gzipped
	zstded
)

// splitName returns a key's compression and its name without the
// compression suffix.
func splitName(key string) (compression, string) {
	lower := strings.ToLower(key)
	switch {
	case strings.HasSuffix(lower, ".gz"):
		return gzipped, lower[:len(lower)-3]
	case strings.HasSuffix(lower, ".zst"):
		return zstded, lower[:len(lower)-4]
	}
	return plain, lower
}

// Match accepts the kind's extensions, with .gz or .zst after them.
func (f *Format) Match(key string) bool {
	_, name := splitName(key)
	ext := path.Ext(name)
	for _, e := range f.kind.extensions() {
		if ext == e {
			return true
		}
	}
	return false
}

// Fetch fetches the bytes of r's units: for a unit range of a split file,
// from the byte before the first unit (to see whether a record starts
// there) to the end of the last; a whole file otherwise. The record that
// straddles the end is read on from the file as Decode needs it.
func (f *Format) Fetch(ctx context.Context, fr *formats.Fragment, r *formats.Read) (formats.Buffer, error) {
	m, err := metaOf(fr)
	if err != nil {
		return nil, err
	}
	first, end := r.Range.FirstUnit, r.Range.EndUnit
	if first >= end {
		return nil, nil
	}
	lo, hi := m.bounds[first], m.bounds[end]
	if lo > 0 {
		lo--
	}
	buf := make([]byte, hi-lo)
	if n, err := fr.Source.ReaderAt(ctx).ReadAt(buf, lo); err != nil && (!errors.Is(err, io.EOF) || n < len(buf)) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("read bytes [%d, %d): %w", lo, hi, err)
	}
	return &fetched{data: buf, at: lo}, nil
}

// fetched is what Fetch holds: the file's bytes from at.
type fetched struct {
	data []byte
	at   int64
}

func (b *fetched) Size() int64 { return int64(len(b.data)) }

func metaOf(fr *formats.Fragment) (*meta, error) {
	m, ok := fr.Meta.(*meta)
	if !ok {
		return nil, fmt.Errorf("text: %s was not inspected by the text driver", fr.URL)
	}
	return m, nil
}
