//go:build cgo

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/drivers"
	"github.com/sluicedata/sluice/formats/text"
	"github.com/sluicedata/sluice/permutation"
	"github.com/sluicedata/sluice/stream"
)

// openOptions are a dataset's options as the C ABI gets them: one JSON
// object, whose names datasetOptions lists. Most decode straight into
// stream.Options; the rest are what the ABI makes stream options of: the
// text drivers' dialect (Formats), a table (Plan), a plan cache and a plan
// store, named by strings as the CLI's flags name them.
type openOptions struct {
	stream.Options
	// Text (CSV, JSON) files, as the CLI's flags of the same names.
	Delimiter, Quote, Escape, Comment string
	NoHeader, Header, NullPadding     bool
	NullStrings                       []string
	CountRows, SkipBadRows            bool
	// An Iceberg table, as the CLI's --iceberg, --catalog and
	// --catalog-name, --snapshot-id, --ref, --as-of and --rewrite: the one
	// URL is the table's metadata location (Iceberg) or its identifier in
	// the catalog (Catalog).
	Iceberg              bool
	Catalog, CatalogName string
	SnapshotID           int64
	Ref, AsOf            string
	Rewrite              map[string]string
	// PlanCacheAt is a folder or object-store prefix that keeps footers
	// between runs (stream.Options.PlanCache); PlanStoreAt the URL or path
	// of the object the ranks share one plan through (stream.PlanStore),
	// and PlanStoreWait its Wait in seconds.
	PlanCacheAt, PlanStoreAt string
	PlanStoreWait            float64
}

// datasetOptions is the ABI's one table of a dataset's option names, each
// with the field its JSON value decodes into. A new stream option gets its
// name here (TestEveryStreamOptionHasAName), and the Python package's list
// names the same (TestPythonNamesEveryOption).
var datasetOptions = map[string]func(o *openOptions) any{
	"urls":                  func(o *openOptions) any { return &o.URLs },
	"columns":               func(o *openOptions) any { return &o.Columns },
	"filter":                func(o *openOptions) any { return &o.Filter },
	"batch_size":            func(o *openOptions) any { return &o.BatchSize },
	"shuffle":               func(o *openOptions) any { return &o.Shuffle },
	"seed":                  func(o *openOptions) any { return &o.Seed },
	"epoch":                 func(o *openOptions) any { return &o.Epoch },
	"clump_size":            func(o *openOptions) any { return &o.ClumpSize },
	"shuffle_window":        func(o *openOptions) any { return &o.ShuffleWindow },
	"shuffle_memory":        func(o *openOptions) any { return &o.ShuffleMemory },
	"shuffle_passes":        func(o *openOptions) any { return &o.ShufflePasses },
	"chunk_bytes":           func(o *openOptions) any { return &o.ChunkBytes },
	"num_splits":            func(o *openOptions) any { return &o.NumSplits },
	"drop_remainder":        func(o *openOptions) any { return &o.DropRemainder },
	"equal_batches":         func(o *openOptions) any { return &o.EqualBatches },
	"rank":                  func(o *openOptions) any { return &o.Rank },
	"world_size":            func(o *openOptions) any { return &o.WorldSize },
	"fetch_concurrency":     func(o *openOptions) any { return &o.Limits.FetchConcurrency },
	"read_concurrency":      func(o *openOptions) any { return &o.Limits.ReadConcurrency },
	"transform_concurrency": func(o *openOptions) any { return &o.Limits.TransformConcurrency },
	"prefetch_batches":      func(o *openOptions) any { return &o.Limits.PrefetchBatches },
	"prefetch_windows":      func(o *openOptions) any { return &o.Limits.PrefetchWindows },
	"prefetch_bytes":        func(o *openOptions) any { return &o.Limits.PrefetchBytes },
	"fetch_ahead_bytes":     func(o *openOptions) any { return &o.Limits.FetchAheadBytes },
	"read_batch_size":       func(o *openOptions) any { return &o.Limits.ReadBatchSize },
	"take_cache_bytes":      func(o *openOptions) any { return &o.Limits.TakeCacheBytes },
	"plan_concurrency":      func(o *openOptions) any { return &o.Limits.PlanConcurrency },
	"cache_dir":             func(o *openOptions) any { return &o.CacheDir },
	"cache_bytes":           func(o *openOptions) any { return &o.CacheBytes },
	"format":                func(o *openOptions) any { return &o.Format },
	"delimiter":             func(o *openOptions) any { return &o.Delimiter },
	"quote":                 func(o *openOptions) any { return &o.Quote },
	"escape":                func(o *openOptions) any { return &o.Escape },
	"comment":               func(o *openOptions) any { return &o.Comment },
	"no_header":             func(o *openOptions) any { return &o.NoHeader },
	"header":                func(o *openOptions) any { return &o.Header },
	"null_padding":          func(o *openOptions) any { return &o.NullPadding },
	"null_strings":          func(o *openOptions) any { return &o.NullStrings },
	"count_rows":            func(o *openOptions) any { return &o.CountRows },
	"skip_bad_rows":         func(o *openOptions) any { return &o.SkipBadRows },
	"iceberg":               func(o *openOptions) any { return &o.Iceberg },
	"catalog":               func(o *openOptions) any { return &o.Catalog },
	"catalog_name":          func(o *openOptions) any { return &o.CatalogName },
	"snapshot_id":           func(o *openOptions) any { return &o.SnapshotID },
	"ref":                   func(o *openOptions) any { return &o.Ref },
	"as_of":                 func(o *openOptions) any { return &o.AsOf },
	"rewrite":               func(o *openOptions) any { return &o.Rewrite },
	"plan_cache":            func(o *openOptions) any { return &o.PlanCacheAt },
	"plan_store":            func(o *openOptions) any { return &o.PlanStoreAt },
	"plan_store_wait":       func(o *openOptions) any { return &o.PlanStoreWait },
}

// mixOptions are a mix's options as the ABI gets them: stream.MixOptions,
// the epoch rule by name, and the sources by handle.
type mixOptions struct {
	stream.MixOptions
	EpochRule string
	Sources   []mixSource
}

// mixOptionNames is the ABI's table of a mix's option names, as
// datasetOptions is of a dataset's.
var mixOptionNames = map[string]func(o *mixOptions) any{
	"sources":     func(o *mixOptions) any { return &o.Sources },
	"epoch":       func(o *mixOptions) any { return &o.EpochRule },
	"rows":        func(o *mixOptions) any { return &o.Rows },
	"no_repeat":   func(o *mixOptions) any { return &o.NoRepeat },
	"seed":        func(o *mixOptions) any { return &o.Seed },
	"start_epoch": func(o *mixOptions) any { return &o.StartEpoch },
	"batch_size":  func(o *mixOptions) any { return &o.BatchSize },
	"rank":        func(o *mixOptions) any { return &o.Rank },
	"world_size":  func(o *mixOptions) any { return &o.WorldSize },
	"concurrency": func(o *mixOptions) any { return &o.Concurrency },
	"prefetch":    func(o *mixOptions) any { return &o.Prefetch },
}

type mixSource struct {
	Dataset int64   `json:"dataset"`
	Weight  float64 `json:"weight"`
}

// decodeOptions decodes one JSON object into o by table: every name must
// be the table's, every value of its field's type. The Python side checks
// names and types before calling; this refuses unknown names too, so that
// a caller of the C ABI other than the Python package gets the same
// guarantee.
func decodeOptions[T any](b []byte, table map[string]func(*T) any, o *T) error {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&raw); err != nil {
		return usageErr("options: %v", err)
	}
	if dec.More() {
		return usageErr("options: trailing data after the JSON object")
	}
	// In order of name, so that of several mistakes the same is named.
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		field, ok := table[name]
		if !ok {
			return usageErr("options: unknown option %q", name)
		}
		if err := json.Unmarshal(raw[name], field(o)); err != nil {
			return usageErr("option %s: %v", name, err)
		}
	}
	return nil
}

// streamOptions are o's stream.Options, with the drivers: the CLI's,
// Parquet, ORC and Avro by file name, then CSV and JSON with the text
// options; format names the one that reads every file.
func (o *openOptions) streamOptions() (stream.Options, error) {
	if len(o.Delimiter) > 1 {
		return stream.Options{}, usageErr("option delimiter %q is more than one byte", o.Delimiter)
	}
	if o.Header && o.NoHeader {
		return stream.Options{}, usageErr("options header and no_header contradict each other")
	}
	to := text.Options{NoHeader: o.NoHeader, Header: o.Header, NullStrings: o.NullStrings, NullPadding: o.NullPadding, Count: o.CountRows}
	if o.Delimiter != "" {
		to.Delimiter = o.Delimiter[0]
	}
	var err error
	if to.Quote, to.NoQuote, err = text.DialectByte(o.Quote, true); err != nil {
		return stream.Options{}, usageErr("option quote %v", err)
	}
	if to.Escape, _, err = text.DialectByte(o.Escape, false); err != nil {
		return stream.Options{}, usageErr("option escape %v", err)
	}
	if to.Comment, to.NoComment, err = text.DialectByte(o.Comment, true); err != nil {
		return stream.Options{}, usageErr("option comment %v", err)
	}
	if o.SkipBadRows {
		to.BadRows = text.BadRowsSkip
	}
	fs := drivers.All(to)
	if o.Format != "" && formats.Named(fs, o.Format) == nil {
		return stream.Options{}, usageErr("option format %q is not a format (%s)", o.Format, strings.Join(formats.Names(fs), ", "))
	}
	so := o.Options
	so.Formats = fs
	return so, nil
}

// mixEpoch parses the mix's epoch rule.
func mixEpoch(s string) (permutation.MixEpoch, error) {
	switch s {
	case "", "largest":
		return permutation.MixLargest, nil
	case "smallest":
		return permutation.MixSmallest, nil
	case "rows":
		return permutation.MixRows, nil
	}
	return 0, usageErr("mix option epoch %q is none of largest, smallest, rows", s)
}

// usageErr is an error of kind usage.
func usageErr(format string, args ...any) error {
	return &kindError{kind: "usage", err: fmt.Errorf(format, args...)}
}
