//go:build cgo

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/drivers"
	"github.com/sluicedata/sluice/formats/text"
	"github.com/sluicedata/sluice/permutation"
	"github.com/sluicedata/sluice/stream"
)

// openOptions are stream.Options under the Python package's names. The
// Python side checks names and types before calling; this decoder refuses
// unknown fields too, so that a caller of the C ABI other than the Python
// package gets the same guarantee.
type openOptions struct {
	URLs                 []string `json:"urls"`
	Columns              []string `json:"columns"`
	Filter               string   `json:"filter"`
	BatchSize            int      `json:"batch_size"`
	Shuffle              bool     `json:"shuffle"`
	Seed                 uint64   `json:"seed"`
	Epoch                int64    `json:"epoch"`
	ClumpSize            int      `json:"clump_size"`
	ShuffleWindow        int      `json:"shuffle_window"`
	ShuffleMemory        int64    `json:"shuffle_memory"`
	ShufflePasses        int      `json:"shuffle_passes"`
	ChunkBytes           int64    `json:"chunk_bytes"`
	NumSplits            int      `json:"num_splits"`
	DropRemainder        bool     `json:"drop_remainder"`
	EqualBatches         bool     `json:"equal_batches"`
	Rank                 int      `json:"rank"`
	WorldSize            int      `json:"world_size"`
	FetchConcurrency     int      `json:"fetch_concurrency"`
	ReadConcurrency      int      `json:"read_concurrency"`
	TransformConcurrency int      `json:"transform_concurrency"`
	PrefetchBatches      int      `json:"prefetch_batches"`
	PrefetchWindows      int      `json:"prefetch_windows"`
	PrefetchBytes        int64    `json:"prefetch_bytes"`
	ReadBatchSize        int      `json:"read_batch_size"`
	TakeCacheBytes       int64    `json:"take_cache_bytes"`
	PlanConcurrency      int      `json:"plan_concurrency"`
	Format               string   `json:"format"`
	// Text (CSV, JSON) files, as the CLI's flags of the same names.
	Delimiter   string   `json:"delimiter"`
	Quote       string   `json:"quote"`
	Escape      string   `json:"escape"`
	Comment     string   `json:"comment"`
	NoHeader    bool     `json:"no_header"`
	Header      bool     `json:"header"`
	NullPadding bool     `json:"null_padding"`
	NullStrings []string `json:"null_strings"`
	CountRows   bool     `json:"count_rows"`
	SkipBadRows bool     `json:"skip_bad_rows"`
	// An Iceberg table, as the CLI's --iceberg, --catalog and
	// --catalog-name, --snapshot-id, --ref, --as-of and --rewrite: the one
	// URL is the table's metadata location (Iceberg) or its identifier in
	// the catalog (Catalog).
	Iceberg     bool              `json:"iceberg"`
	Catalog     string            `json:"catalog"`
	CatalogName string            `json:"catalog_name"`
	SnapshotID  int64             `json:"snapshot_id"`
	Ref         string            `json:"ref"`
	AsOf        string            `json:"as_of"`
	Rewrite     map[string]string `json:"rewrite"`
	// PlanCache is a folder or object-store prefix that keeps footers
	// between runs (stream.Options.PlanCache); PlanStore the URL or path of
	// the object the ranks share one plan through (stream.PlanStore), and
	// PlanStoreWait its Wait in seconds.
	PlanCache     string  `json:"plan_cache"`
	PlanStore     string  `json:"plan_store"`
	PlanStoreWait float64 `json:"plan_store_wait"`
}

// mixOptions are stream.MixOptions and the sources, by handle.
type mixOptions struct {
	Sources     []mixSource `json:"sources"`
	Epoch       string      `json:"epoch"`
	Rows        int64       `json:"rows"`
	NoRepeat    bool        `json:"no_repeat"`
	Seed        uint64      `json:"seed"`
	StartEpoch  int64       `json:"start_epoch"`
	BatchSize   int         `json:"batch_size"`
	Rank        int         `json:"rank"`
	WorldSize   int         `json:"world_size"`
	Concurrency int         `json:"concurrency"`
	Prefetch    int         `json:"prefetch"`
}

type mixSource struct {
	Dataset int64   `json:"dataset"`
	Weight  float64 `json:"weight"`
}

// decodeStrict decodes one JSON object into v, refusing unknown fields and
// trailing data.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return usageErr("options: %v", err)
	}
	if dec.More() {
		return usageErr("options: trailing data after the JSON object")
	}
	return nil
}

// streamOptions maps o to stream.Options. The formats are the CLI's:
// Parquet, ORC and Avro by file name, then CSV and JSON with the text
// options; format names the one that reads every file.
func (o openOptions) streamOptions() (stream.Options, error) {
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
	return stream.Options{
		URLs:          slices.Clone(o.URLs),
		Columns:       slices.Clone(o.Columns),
		Filter:        o.Filter,
		BatchSize:     o.BatchSize,
		Shuffle:       o.Shuffle,
		Seed:          o.Seed,
		Epoch:         o.Epoch,
		ClumpSize:     o.ClumpSize,
		ShuffleWindow: o.ShuffleWindow,
		ShuffleMemory: o.ShuffleMemory,
		ShufflePasses: o.ShufflePasses,
		ChunkBytes:    o.ChunkBytes,
		NumSplits:     o.NumSplits,
		DropRemainder: o.DropRemainder,
		EqualBatches:  o.EqualBatches,
		Rank:          o.Rank,
		WorldSize:     o.WorldSize,
		Limits: stream.Limits{
			FetchConcurrency:     o.FetchConcurrency,
			ReadConcurrency:      o.ReadConcurrency,
			TransformConcurrency: o.TransformConcurrency,
			PrefetchBatches:      o.PrefetchBatches,
			PrefetchWindows:      o.PrefetchWindows,
			PrefetchBytes:        o.PrefetchBytes,
			ReadBatchSize:        o.ReadBatchSize,
			TakeCacheBytes:       o.TakeCacheBytes,
			PlanConcurrency:      o.PlanConcurrency,
		},
		Formats: fs,
		Format:  o.Format,
	}, nil
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
