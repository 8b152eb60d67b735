package parquet

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"

	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/parquet/internal/bufpool"
	"github.com/sluicedata/sluice/formats/parquet/internal/flatdecode"
	"github.com/sluicedata/sluice/storage"
)

// Format reads Apache Parquet files with arrow-go: the formats driver for
// .parquet files. The footer is parsed
// once, at plan time, and kept. A read fetches the column chunks it needs
// before decoding, all at once: one range request per chunk, adjacent chunks
// coalesced into one request, up to FetchConcurrency requests in flight, so
// a read of several row groups costs about one round trip, not one per
// chunk.
type Format struct {
	// CoalesceGap joins the requests for two chunks when at most this many
	// unneeded bytes lie between them: fewer requests for more bytes.
	// Default 0: only chunks that touch are joined, so nothing unselected is
	// fetched. On object stores with high latency a gap of a few hundred KiB
	// saves requests when columns are skipped.
	CoalesceGap int64
	// FetchConcurrency is the number of range requests one read keeps in
	// flight. Default 8.
	FetchConcurrency int
	// MaxRequestBytes splits a request for more than this many bytes (a
	// large column chunk, or the chunks of adjacent row groups joined) into
	// parts fetched concurrently into one buffer, so that it arrives at the
	// speed of several connections rather than one. Default 8 MiB; a
	// negative value never splits.
	MaxRequestBytes int64
	// InvalidUTF8 is what a read does with a string that is not UTF-8.
	// Default ErrorOnInvalidUTF8: the read fails, naming the value's file,
	// row group, column and row.
	InvalidUTF8 InvalidUTF8
	// INT96 is how INT96 timestamps are read. Default INT96Microseconds:
	// timestamp[us, UTC], every year Spark writes; see INT96.
	INT96 INT96
	// ArrowGoDecode decodes every column chunk with arrow-go's pqarrow.
	// Default false: the flat columns (top-level, not repeated) of
	// integers, dates, times, timestamps, floats, booleans, strings and
	// binaries, in the common encodings and codecs, are decoded
	// by sluice's own decoder straight into Arrow buffers, with less than
	// half of arrow-go's CPU time for the decoding proper; the batches are
	// the same, value for value and type for type, and any chunk it does
	// not read is arrow-go's. Set it to rule the own decoder out.
	ArrowGoDecode bool
	// SerialColumns decodes the columns of a batch one after another on
	// the goroutine running Decode. Default false: where the own decoder
	// reads two or more of a batch's columns and fewer reads decode at
	// once than there are cores (GOMAXPROCS), those columns are decoded on
	// up to cores/reads goroutines, joined before the batch is delivered
	// (the batch is the same either way). This spreads one large row
	// group over idle cores; with as many reads as cores it changes
	// nothing, but for the read the reader says it waits for
	// (formats.WithWaited), whose columns get up to a goroutine each.
	SerialColumns bool
}

// Name returns "parquet".
func (Format) Name() string { return "parquet" }

// Match accepts .parquet, .parq and .pq files.
func (Format) Match(key string) bool {
	switch strings.ToLower(path.Ext(key)) {
	case ".parquet", ".parq", ".pq":
		return true
	}
	return false
}

// parquetMeta is what Inspect keeps for Read.
type parquetMeta struct {
	md *metadata.FileMetaData
	// leaves maps a top-level column name to its leaf column indices.
	leaves map[string][]int
	// selected are the leaves of the columns Inspect was asked for,
	// sorted: those FindPages walks.
	selected []int
	// starts[i] is the first row of row group i; starts[len] is the total.
	starts []int64
	// maxChunk is the largest column chunk that lies inside the file: no
	// page can be larger, so Read caps arrow-go's compressed page size there
	// instead of letting a corrupt page header make it allocate up to 64 MiB.
	// Every column's chunks count, not only the selected ones': a read may
	// decode columns that were not selected when the file was inspected (a
	// filter's, or a table format's projection planned apart from it), and a
	// cap from the others refused their pages as too large.
	maxChunk int64
	// index caches the offset indexes of row groups read in part; walks
	// holds the pages found by walking the headers of those without one.
	index offsetIndexes
	walks pageWalks
	// prune caches what filters read of statistics and bloom filters.
	prune pruneCache
	// readMD is the metadata arrow-go decodes with: md, or a copy that
	// declares other physical types for the columns in convert (see
	// readAs), whose values are converted back after decoding.
	readMD  *metadata.FileMetaData
	convert map[string]conversion
	// ownOnly holds the leaves only flatdecode reads (see fixedDelta):
	// their row groups are fetched whole and read by openColumns, which
	// fails the read where flatdecode does not take such a chunk.
	ownOnly map[int]bool
	// flat holds the leaves that are flat columns flatdecode reads (see
	// flatLeaf), of top-level fields.
	flat map[int]bool
}

// readsOwnOnly reports whether leaves include one only flatdecode reads
// (see ownOnly). Such a read is of whole row groups: one of some pages
// would go to arrow-go (readPages) unless flatdecode took every column.
func (m *parquetMeta) readsOwnOnly(leaves []int) bool {
	for _, l := range leaves {
		if m.ownOnly[l] {
			return true
		}
	}
	return false
}

// readMetadata is the metadata arrow-go decodes with (see readMD).
func (m *parquetMeta) readMetadata() *metadata.FileMetaData {
	if m.readMD != nil {
		return m.readMD
	}
	return m.md
}

// footerGuess is how much of a file's end Inspect reads first, so that most
// files cost one request, not two: the footer and, before it, the page
// index. Both grow with the row groups and columns, which grow with the
// file, so the guess does too: a 512th of the file, from 16 KiB to 256 KiB.
// Every rank reads every footer, so a fixed large guess would cost small
// files more than their footers.
func footerGuess(size int64) int64 {
	return min(max(size/512, 16<<10), 256<<10, size)
}

// chunkPadding is how far past a column chunk arrow-go may read: old
// parquet-mr versions left the dictionary page header out of a chunk's size
// (PARQUET-816), and arrow-go reads up to this much more from their files.
const chunkPadding = 100

// Inspect reads and checks the footer: that every count in it fits in the
// bytes that carry it (see checkFooter) and that every selected column chunk
// lies inside the file (arrow-go allocates a chunk's stated size before
// reading it), and records row group sizes.
func (p Format) Inspect(ctx context.Context, f *formats.Fragment, columns []string) error {
	md, tail, err := readFooter(ctx, f)
	if err != nil {
		return err
	}
	md, variants, err := plainVariants(md)
	if err != nil {
		return fmt.Errorf("%w: schema: %w", formats.ErrCorrupt, err)
	}
	if err := checkMapKeyValue(md.Schema.Root(), false, ""); err != nil {
		return fmt.Errorf("%w: schema: %w", formats.ErrCorrupt, err)
	}
	props := pqarrow.ArrowReadProperties{}
	manifest, err := pqarrow.NewSchemaManifest(md.Schema, md.KeyValueMetadata(), &props)
	if err != nil {
		return fmt.Errorf("%w: schema: %w", formats.ErrCorrupt, err)
	}
	schema, err := pqarrow.FromParquet(md.Schema, &props, md.KeyValueMetadata())
	if err != nil {
		return fmt.Errorf("%w: schema: %w", formats.ErrCorrupt, err)
	}
	schema = annotateStrings(schema, manifest, md.Schema)
	readMD, schema, convert, err := readAs(md, manifest, schema, p.INT96)
	if err != nil {
		return fmt.Errorf("%w: schema: %w", formats.ErrCorrupt, err)
	}
	ownOnly, err := fixedDelta(md, manifest, schema, convert, !p.ArrowGoDecode)
	if err != nil {
		return fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
	}
	if schema, convert, err = variantsOf(schema, variants, convert); err != nil {
		return fmt.Errorf("%w: schema: %w", formats.ErrCorrupt, err)
	}
	meta := &parquetMeta{md: md, leaves: map[string][]int{}, readMD: readMD, convert: convert, ownOnly: ownOnly, flat: map[int]bool{}}
	twice := map[string]bool{}
	for i := range manifest.Fields {
		sf := &manifest.Fields[i]
		if _, _, ok := meta.flatLeaf(sf, readMD); ok {
			meta.flat[sf.ColIndex] = true
		}
		if _, ok := meta.leaves[sf.Field.Name]; ok {
			twice[sf.Field.Name] = true
		}
		meta.leaves[sf.Field.Name] = leafIndices(sf, nil)
	}
	selected := columns
	if selected == nil {
		for _, fl := range schema.Fields() {
			selected = append(selected, fl.Name)
		}
	}
	var selLeaves []int
	for _, c := range selected {
		if twice[c] {
			// Columns are selected by name: which one would be ambiguous.
			if columns == nil {
				return fmt.Errorf("%w: the file has more than one column named %q: select the columns to read without it", formats.ErrSchema, c)
			}
			return fmt.Errorf("%w: the file has more than one column named %q", formats.ErrSchema, c)
		}
		selLeaves = append(selLeaves, meta.leaves[c]...) // a missing column is reported by unify
	}
	nrg := md.NumRowGroups()
	ncols := md.Schema.NumColumns()
	units := make([]formats.Unit, nrg)
	starts := make([]int64, nrg+1)
	var rows int64
	for i := range nrg {
		rg := md.RowGroup(i)
		n := rg.NumRows()
		if n < 0 || n > math.MaxInt64-rows {
			return fmt.Errorf("%w: row group %d: row count %d is negative or overflows", formats.ErrCorrupt, i, n)
		}
		if rg.NumColumns() != ncols {
			return fmt.Errorf("%w: row group %d has %d column chunks for %d columns", formats.ErrCorrupt, i, rg.NumColumns(), ncols)
		}
		for c := range ncols {
			if err := checkPageIndex(rg, c); err != nil {
				return fmt.Errorf("%w: row group %d column %d: %w", formats.ErrCorrupt, i, c, err)
			}
			if cc, err := rg.ColumnChunk(c); err == nil {
				if size := cc.TotalCompressedSize(); size >= 0 && size <= f.Size {
					meta.maxChunk = max(meta.maxChunk, size)
				}
			}
		}
		var bytes int64
		for _, leaf := range selLeaves {
			cc, err := rg.ColumnChunk(leaf)
			if err != nil {
				return fmt.Errorf("%w: row group %d column %d: %w", formats.ErrCorrupt, i, leaf, err)
			}
			start := cc.DataPageOffset()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < start {
				start = cc.DictionaryPageOffset()
			}
			size := cc.TotalCompressedSize()
			if start < 0 || size < 0 || start > f.Size || size > f.Size-start {
				return fmt.Errorf("%w: row group %d column %d: chunk at %d+%d lies outside the file's %d bytes", formats.ErrCorrupt, i, leaf, start, size, f.Size)
			}
			bytes += size
		}
		_, _, paged := offsetIndexRange(rg)
		paged = (paged || meta.walkable(i, selLeaves)) && !meta.readsOwnOnly(selLeaves)
		units[i] = formats.Unit{Rows: n, Bytes: bytes, Paged: paged, Decoded: decodedSize(rg, n, schema, selected, meta.leaves)}
		starts[i] = rows
		rows += n
	}
	starts[nrg] = rows
	// The row groups' counts, not the file's, are what reading is checked
	// against (Read verifies each row group it reads to the end), and some
	// writers leave the file's count at zero.
	meta.starts = starts
	meta.selected = sortedUnique(slices.Clone(selLeaves))
	meta.index.keep(md, f.Size, tail)
	f.Units, f.Rows, f.Schema, f.Meta = units, rows, schema, meta
	return nil
}

// readFooter fetches, checks and parses the footer, with the Arrow schema
// stored in it. It refuses encrypted files: sluice has no keys to give.
//
// It also returns the bytes it read speculatively before the footer (nil
// when the footer came from the cache): writers put the page index there,
// which reads of cut row groups then need not fetch again.
func readFooter(ctx context.Context, f *formats.Fragment) (*metadata.FileMetaData, []byte, error) {
	const tailLen = 8 // footer length and magic
	if f.Size < 4+tailLen {
		return nil, nil, fmt.Errorf("%w: %d bytes is too small for a Parquet file%s", formats.ErrCorrupt, f.Size, textHint(ctx, f))
	}
	var key []byte
	if c := f.Cache(); c != nil {
		key = f.CacheKey("parquet-footer")
		if footer, err := c.Get(ctx, key); err == nil && len(footer) > 0 {
			// Checked and parsed as if fetched: a cache is storage too.
			md, err := parseFooter(footer, f)
			return md, nil, err
		}
	}
	r := f.Source.ReaderAt(ctx)
	tail := make([]byte, footerGuess(f.Size))
	if _, err := r.ReadAt(tail, f.Size-int64(len(tail))); err != nil {
		return nil, nil, err
	}
	switch magic := string(tail[len(tail)-4:]); magic {
	case "PAR1":
	case "PARE":
		return nil, nil, fmt.Errorf("%w: the footer is encrypted; encrypted Parquet files are not supported", formats.ErrCorrupt)
	default:
		return nil, nil, fmt.Errorf("%w: no Parquet magic at the end of the file (%q): truncated, or not Parquet%s", formats.ErrCorrupt, magic, textHint(ctx, f))
	}
	n := int64(binary.LittleEndian.Uint32(tail[len(tail)-tailLen:]))
	if n > f.Size-4-tailLen {
		return nil, nil, fmt.Errorf("%w: footer of %d bytes in a file of %d", formats.ErrCorrupt, n, f.Size)
	}
	var footer []byte
	if n+tailLen <= int64(len(tail)) {
		footer = tail[int64(len(tail))-tailLen-n : len(tail)-tailLen]
	} else {
		footer = make([]byte, n)
		if _, err := r.ReadAt(footer, f.Size-tailLen-n); err != nil {
			return nil, nil, err
		}
	}
	md, err := parseFooter(footer, f)
	if err != nil {
		return nil, nil, err
	}
	if key != nil {
		// A cache that cannot be written costs the next plan a read, no more.
		_ = f.Cache().Set(ctx, key, footer)
	}
	return md, tail, nil
}

// textHint is what the error of a file without Parquet magic adds when
// its first bytes look like text: it is most likely a CSV or JSON file
// whose name does not say so (.tbl, .dat, .txt, no extension), read as
// Parquet because a file named explicitly goes to the first driver. It
// costs one small read, on the way to an error only.
func textHint(ctx context.Context, f *formats.Fragment) string {
	head := make([]byte, min(f.Size, 4<<10))
	if len(head) == 0 {
		return ""
	}
	if _, err := f.Source.ReaderAt(ctx).ReadAt(head, 0); err != nil || !formats.LooksLikeText(head) {
		return ""
	}
	return "; its first bytes look like text (printable UTF-8 lines): name its driver with Options.Format, such as \"csv\", \"tsv\" or \"jsonl\" (in sluice, --format csv)"
}

// parseFooter checks and parses the footer bytes of f.
func parseFooter(footer []byte, f *formats.Fragment) (*metadata.FileMetaData, error) {
	if err := checkFooter(footer); err != nil {
		return nil, fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
	}
	md, err := metadata.NewFileMetaData(renameDuplicateColumns(dropUnknownLogicalTypes(dropEmptyGroups(footer))), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
	}
	if md.IsSetEncryptionAlgorithm() {
		return nil, fmt.Errorf("%w: the columns are encrypted; encrypted Parquet files are not supported", formats.ErrCorrupt)
	}
	if err := checkStoredSchema(md.KeyValueMetadata()); err != nil {
		return nil, fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
	}
	md.SetSourceFileSize(f.Size)
	return md, nil
}

// checkPageIndex checks column c's page index locations as arrow-go does
// when it opens any column chunk of the row group (Read never reads the
// index itself), so that a bad one is reported once, at plan time.
func checkPageIndex(rg *metadata.RowGroupMetaData, c int) error {
	for _, idx := range []struct {
		name string
		loc  func(int) (metadata.IndexLocation, bool)
	}{{"column index", rg.ColumnIndexLocation}, {"offset index", rg.OffsetIndexLocation}} {
		loc, ok := idx.loc(c)
		if ok && (loc.Offset < 0 || loc.Length <= 0 || loc.Offset > math.MaxInt64-int64(loc.Length)) {
			return fmt.Errorf("%s at %d+%d", idx.name, loc.Offset, loc.Length)
		}
	}
	return nil
}

func leafIndices(sf *pqarrow.SchemaField, out []int) []int {
	if sf.IsLeaf() {
		return append(out, sf.ColIndex)
	}
	for i := range sf.Children {
		out = leafIndices(&sf.Children[i], out)
	}
	return out
}

// parquetFetched is what Fetch hands to Decode: the selected leaves,
// the prefetched chunk bytes and the dictionary bounds of each chunk.
type parquetFetched struct {
	leaves []int
	spans  []span
	chunks map[int64]chunkCheck // by offset, the chunks Decode reads (see chunkReader)
	bytes  int64
	// paged holds the row groups fetched page by page, and partial the
	// offsets of their chunks, which only hold the fetched pages.
	paged   map[int]bool
	partial map[int64]bool
	checks  []pageCheck
	// ownDecodes is set where flatdecode takes every leaf of the read
	// (parquetMeta.ownDecodes), and leftOut holds, by chunk offset, the
	// dictionary pages of paged chunks that the fetch left out, as none
	// of their fetched pages needs them (see rowGroupIndex.headless).
	ownDecodes bool
	leftOut    map[int64]byteRange
	// fetchedPages holds, by chunk offset, the pages fetched of each
	// chunk of a paged row group, for flatdecode.
	fetchedPages map[int64]fetchedPages
	// fetchedBufs are the buffers fetchRanges filled, which Recycle hands
	// on.
	fetchedBufs [][]byte
	// bodies are the decompressed pages that the reads of the fetch's
	// parts share, which Recycle hands on too.
	bodies flatdecode.Bodies
	// md, if set, is the metadata to read with: readMD with the offset
	// indexes of the row groups whose pages were walked.
	md *metadata.FileMetaData

	// pruned holds the row groups the read's filter rules out: neither
	// fetched nor decoded; narrow the rows of others that the filter's
	// pages may match (see narrowPages).
	pruned map[int]bool
	narrow map[int][2]int64
}

// Size is the memory the fetched chunks hold.
func (fe *parquetFetched) Size() int64 { return fe.bytes }

// Fetch fetches the column chunks of the row groups that overlap the
// read's rows: the I/O half of a read, which a stream runs ahead of
// decoding.
func (p Format) Fetch(ctx context.Context, f *formats.Fragment, r *formats.Read) (formats.Buffer, error) {
	meta := f.Meta.(*parquetMeta)
	start, end := r.Range.Start, r.Range.End
	fe := &parquetFetched{chunks: map[int64]chunkCheck{}}
	for _, fl := range r.Schema.Fields() {
		fe.leaves = append(fe.leaves, meta.leaves[fl.Name]...)
	}
	fe.leaves = sortedUnique(fe.leaves)
	fe.ownDecodes = !p.ArrowGoDecode && meta.ownDecodes(fe.leaves)
	if start == end {
		return fe, nil
	}
	var ranges []byteRange
	var index []span
	var walked []*rowGroupIndex
	var tails []*tailRead
	defer func() {
		for _, t := range tails {
			t.release() // where an error came first
		}
	}()
	room := map[int64]int64{} // by a range's end, what a second round may fill after it
	for rg := range len(meta.starts) - 1 {
		first, last := meta.starts[rg], meta.starts[rg+1]
		if last <= start || first >= end {
			continue
		}
		if r.Filter != nil && !mayMatch(ctx, f, rg, r.Filter, r.Schema) {
			fe.prune(rg)
			continue
		}
		if r.Filter != nil {
			lo, hi, err := fe.narrowPages(ctx, f, rg, r, max(start, first)-first, min(end, last)-first)
			if err != nil {
				return nil, err // the file could not be fetched, which says nothing of its contents
			}
			if lo == hi {
				fe.prune(rg)
				continue
			}
		}
		if lo, hi := fe.narrowed(rg, max(start, first)-first, min(end, last)-first); (lo > 0 || hi < last-first) && !meta.readsOwnOnly(fe.leaves) {
			ix, err := meta.rowGroupIndex(ctx, f, rg, fe.leaves)
			if err != nil {
				return nil, err // the file could not be fetched, which says nothing of its contents
			}
			if ix == nil {
				t, rs, more, err := meta.planPart(ctx, f, rg, fe.leaves, lo, hi, fe.ownDecodes, p.FetchConcurrency)
				if err != nil {
					return nil, err
				}
				if t != nil {
					tails = append(tails, t)
					ranges = append(ranges, rs...)
					maps.Copy(room, more)
					continue
				}
				at := virtualAt(f, walked)
				if ix, err = meta.walkedIndex(ctx, f, rg, fe.leaves, lo, hi, at, p.FetchConcurrency); err != nil {
					return nil, err
				}
				if ix != nil {
					walked = append(walked, ix)
				}
			}
			if ix != nil {
				rs, err := fe.expectPages(meta, rg, ix, lo, hi)
				if err != nil {
					return nil, fmt.Errorf("%w: row group %d: %w", formats.ErrCorrupt, rg, err)
				}
				ranges = append(ranges, rs...)
				index = append(index, span{ix.at, ix.bytes})
				continue
			}
		}
		rs, err := expect(meta, rg, fe.leaves, fe.chunks)
		if err != nil {
			return nil, fmt.Errorf("%w: row group %d: %w", formats.ErrCorrupt, rg, err)
		}
		ranges = append(ranges, rs...)
	}
	spans, err := fetchRanges(ctx, f.Source.ReaderAt(ctx), coalesce(ranges, p.CoalesceGap), room, p.FetchConcurrency, p.MaxRequestBytes)
	if err != nil {
		return nil, err // the file could not be fetched, which says nothing of its contents
	}
	if len(tails) > 0 {
		// Sorted for the walks in them, which may lengthen them (fetchedOr).
		slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.off, b.off) })
		fetched := fetchedOr{spans: spans, rd: f.Source.ReaderAt(ctx), head: map[int64]int64{}}
		for _, sp := range spans {
			if _, ok := room[sp.off+int64(len(sp.data))]; ok {
				fetched.head[sp.off] = walkAhead
			}
		}
		var missing []byteRange
		for _, t := range tails {
			ix, err := meta.finishTail(ctx, f, t, fetched, virtualAt(f, walked))
			t.release()
			if err != nil {
				return nil, err
			}
			var rs []byteRange
			if ix != nil {
				rs, err = fe.expectPages(meta, t.rg, ix, t.lo, t.hi)
				walked = append(walked, ix)
				index = append(index, span{ix.at, ix.bytes})
			} else {
				rs, err = expect(meta, t.rg, fe.leaves, fe.chunks)
			}
			if err != nil {
				return nil, fmt.Errorf("%w: row group %d: %w", formats.ErrCorrupt, t.rg, err)
			}
			for _, r := range rs {
				if b := (&chunkReader{spans: spans}).fetchedAt(r.from, r.to-r.from); int64(len(b)) < r.to-r.from {
					missing = append(missing, r)
				}
			}
		}
		if len(missing) > 0 {
			// Bytes the walk in the fetched ones found needed after all.
			spans, err = fetchMore(ctx, f.Source.ReaderAt(ctx), spans, missing, p.CoalesceGap, p.FetchConcurrency, p.MaxRequestBytes)
			if err != nil {
				return nil, err // the file could not be fetched, which says nothing of its contents
			}
		}
	}
	if len(walked) > 0 {
		fe.md = withOffsetIndexes(meta.readMetadata(), walked)
	}
	for _, sp := range spans {
		fe.bytes += int64(len(sp.data))
		fe.fetchedBufs = append(fe.fetchedBufs, sp.data)
	}
	// The offset indexes, cached with the footer, are served from memory
	// when arrow-go seeks with them.
	fe.spans = append(spans, index...)
	slices.SortFunc(fe.spans, func(a, b span) int { return cmp.Compare(a.off, b.off) })
	if err := fe.checkPages(); err != nil {
		return nil, fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
	}
	return fe, nil
}

// chunkReader is the file as arrow-go sees it during Read. It remembers the
// first storage error (arrow-go wraps it in messages of its own, and a failed
// fetch must not be reported as a corrupt file), and it checks the page
// headers of each column chunk before arrow-go decodes them (see
// checkChunk): arrow-go trusts them.
type chunkReader struct {
	*storage.Reader
	// chunks maps the offset of each column chunk Read fetches to what the
	// checks of its pages need.
	chunks map[int64]chunkCheck

	// spans are the prefetched byte ranges, sorted by offset.
	spans []span
	// partial holds the offsets of column chunks of which only some pages
	// were fetched: arrow-go reads such a chunk whole, and gets the fetched
	// pages with zeros between them, which it never parses.
	partial map[int64]bool
	// leftOut holds, by chunk offset, the dictionary pages a fetch left
	// out (parquetFetched.leftOut): arrow-go, which reads them whatever
	// the pages need, gets them from storage.
	leftOut map[int64]byteRange
	readOut map[int64][]byte // what fillLeftOut read of them

	mu    sync.Mutex
	ioErr error
	// pageErr is the first page a check refused: arrow-go buries it in
	// messages of its own.
	pageErr error
}

// byteRange is [from, to) of a file.
type byteRange struct{ from, to int64 }

// span is a prefetched range and its bytes.
type span struct {
	off  int64
	data []byte
}

// coalesce sorts ranges and joins those that overlap or lie at most gap
// bytes apart.
func coalesce(ranges []byteRange, gap int64) []byteRange {
	slices.SortFunc(ranges, func(a, b byteRange) int { return cmp.Compare(a.from, b.from) })
	var out []byteRange
	for _, r := range ranges {
		if n := len(out); n > 0 && r.from-out[n-1].to <= gap {
			out[n-1].to = max(out[n-1].to, r.to)
			continue
		}
		out = append(out, r)
	}
	return out
}

// fetchRanges fetches ranges, each into one buffer, with up to concurrency
// requests in flight (default 8); a range longer than maxRequest (default 8
// MiB, negative for no limit) is fetched in parts of at most that size.
// A range whose end room holds gets a buffer with that much more capacity,
// for fetchMore to fill.
func fetchRanges(ctx context.Context, rd *storage.Reader, ranges []byteRange, room map[int64]int64, concurrency int, maxRequest int64) ([]span, error) {
	if concurrency <= 0 {
		concurrency = 8
	}
	switch {
	case maxRequest == 0:
		maxRequest = 8 << 20
	case maxRequest < 0:
		maxRequest = math.MaxInt64
	}
	spans := make([]span, len(ranges))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	rd = rd.WithContext(gctx)
	for i, br := range ranges {
		n := br.to - br.from
		spans[i] = span{br.from, bufpool.Get(int(n + room[br.to]))[:n]}
		for off := br.from; off < br.to; {
			n := min(br.to-off, maxRequest)
			part, at := spans[i].data[off-br.from:off-br.from+n], off
			g.Go(func() error {
				return readFull(rd, part, at)
			})
			off += n
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return spans, nil
}

// fetchMore fetches ranges that a second round found needed, and returns
// spans with them: where one goes on from inside a span of the first
// round (a head read's guess fell short of its pages), the bytes past the
// span are read onto its end (in the room its buffer was given, or a
// larger buffer), so that a page lies in one buffer without a byte
// fetched twice; the others are coalesced (gap) and fetched as
// fetchRanges does. A span that a lengthened one then holds is dropped:
// chunkReader finds a page in the last span that starts before it.
func fetchMore(ctx context.Context, rd *storage.Reader, spans []span, ranges []byteRange, gap int64, concurrency int, maxRequest int64) ([]span, error) {
	limit := maxRequest // as fetchRanges takes it
	switch {
	case limit == 0:
		limit = 8 << 20
	case limit < 0:
		limit = math.MaxInt64
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.off, b.off) })
	slices.SortFunc(ranges, func(a, b byteRange) int { return cmp.Compare(a.from, b.from) })
	// Where each span is to end: a range goes on from the last span that
	// starts at or before it, if that one reaches it.
	ends := make([]int64, len(spans))
	for i, sp := range spans {
		ends[i] = sp.off + int64(len(sp.data))
	}
	var rest []byteRange
	for _, br := range ranges {
		i := sort.Search(len(spans), func(i int) bool { return spans[i].off > br.from }) - 1
		switch {
		case i < 0 || br.from > ends[i]:
			rest = append(rest, br)
		case br.to > ends[i]:
			ends[i] = br.to
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(concurrency, 1))
	grd := rd.WithContext(gctx)
	for i := range spans {
		sp := &spans[i]
		have, want := int64(len(sp.data)), ends[i]-sp.off
		if want == have {
			continue
		}
		if want > int64(cap(sp.data)) {
			// No room: the span moves to a buffer that has it, rather
			// than another span holding its bytes again.
			b := bufpool.Get(int(want))
			copy(b, sp.data)
			bufpool.Put(sp.data)
			sp.data = b
		}
		sp.data = sp.data[:want]
		for from := have; from < want; {
			n := min(want-from, limit)
			part, at := sp.data[from:from+n], sp.off+from
			g.Go(func() error { return readFull(grd, part, at) })
			from += n
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if len(rest) > 0 {
		more, err := fetchRanges(ctx, rd, coalesce(rest, gap), nil, concurrency, maxRequest)
		if err != nil {
			return nil, err
		}
		spans = append(spans, more...)
	}
	slices.SortFunc(spans, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.off, b.off), -cmp.Compare(len(a.data), len(b.data)))
	})
	out := spans[:0]
	for _, sp := range spans {
		if n := len(out); n > 0 && sp.off+int64(len(sp.data)) <= out[n-1].off+int64(len(out[n-1].data)) {
			bufpool.Put(sp.data) // held by the span before
			continue
		}
		out = append(out, sp)
	}
	return out, nil
}

// fetched fills p from a prefetched span if one holds all of it.
func (r *chunkReader) fetched(p []byte, off int64) bool {
	i := sort.Search(len(r.spans), func(i int) bool { return r.spans[i].off > off }) - 1
	if i < 0 {
		return false
	}
	sp := r.spans[i]
	if off+int64(len(p)) > sp.off+int64(len(sp.data)) {
		return false
	}
	copy(p, sp.data[off-sp.off:])
	return true
}

// virtualAt is where the next walked offset index of a read is served:
// past the end of the file, after those of the read's earlier row groups.
func virtualAt(f *formats.Fragment, walked []*rowGroupIndex) int64 {
	if n := len(walked); n > 0 {
		return walked[n-1].at + int64(len(walked[n-1].bytes))
	}
	return f.Size
}

// fetchedAt is up to n fetched bytes at off, those of the one span that
// holds off, where they lie; empty where no span holds off.
func (r *chunkReader) fetchedAt(off, n int64) []byte {
	i := sort.Search(len(r.spans), func(i int) bool { return r.spans[i].off > off }) - 1
	if i < 0 {
		return nil
	}
	sp := r.spans[i]
	from := off - sp.off
	if from >= int64(len(sp.data)) {
		return nil
	}
	to := from + min(n, int64(len(sp.data))-from)
	return sp.data[from:to:to]
}

// expect returns the byte ranges of the chunks of the leaves of row group
// rg, and records in chunks what checking their pages needs.
func expect(meta *parquetMeta, rg int, leaves []int, chunks map[int64]chunkCheck) ([]byteRange, error) {
	g := meta.md.RowGroup(rg)
	var out []byteRange
	for _, leaf := range leaves {
		cc, err := g.ColumnChunk(leaf)
		if err != nil {
			return nil, err
		}
		start, _ := chunkSpan(cc)
		meta.expectChunk(chunks, start, leaf, cc.NumValues())
		out = append(out, byteRange{start, start + cc.TotalCompressedSize()})
	}
	return out, nil
}

// expectChunk records the chunk of leaf at offset start, of values values.
// Chunks sharing an offset (only in corrupt files) get the strictest bound.
func (m *parquetMeta) expectChunk(chunks map[int64]chunkCheck, start int64, leaf int, values int64) {
	col := m.readMetadata().Schema.Column(leaf)
	c, ok := chunks[start]
	if !ok {
		c = chunkCheck{col: col, values: values}
	}
	c.valueBits = max(c.valueBits, minValueBits(col))
	chunks[start] = c
}

func (r *chunkReader) ReadAt(p []byte, off int64) (int, error) {
	if r.fetched(p, off) {
		return len(p), r.check(p, off, checkChunk)
	}
	if r.partial[off] && r.fill(p, off) {
		if err := r.fillLeftOut(p, off); err != nil {
			return 0, err
		}
		return len(p), r.check(p, off, checkFirstPage)
	}
	n, err := r.Reader.ReadAt(p, off)
	if err != nil && !errors.Is(err, io.EOF) { // io.EOF: a read past the end, so a bad offset
		r.mu.Lock()
		if r.ioErr == nil {
			r.ioErr = err
		}
		r.mu.Unlock()
		return n, err
	}
	if cerr := r.check(p[:n], off, checkChunk); cerr != nil {
		return n, cerr
	}
	return n, err
}

// fillLeftOut reads into p, a chunk at off that fill filled, the
// dictionary page its fetch left out, if it did: read once, as arrow-go
// may read the chunk more than once.
func (r *chunkReader) fillLeftOut(p []byte, off int64) error {
	h, ok := r.leftOut[off]
	if !ok || h.to-off > int64(len(p)) {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.readOut[off]
	if !ok {
		b = make([]byte, h.to-h.from)
		if _, err := r.Reader.ReadAt(b, h.from); err != nil {
			if r.ioErr == nil {
				r.ioErr = err
			}
			return err
		}
		if r.readOut == nil {
			r.readOut = map[int64][]byte{}
		}
		r.readOut[off] = b
	}
	copy(p[h.from-off:], b)
	return nil
}

// check checks p, read at off, with fn if it is a chunk Read fetches.
func (r *chunkReader) check(p []byte, off int64, fn func([]byte, int64, chunkCheck) error) error {
	c, ok := r.chunks[off]
	if !ok {
		return nil
	}
	err := fn(p, off, c)
	if err != nil {
		r.mu.Lock()
		if r.pageErr == nil {
			r.pageErr = err
		}
		r.mu.Unlock()
	}
	return err
}

// pageFailure is the first page a check refused, or nil.
func (r *chunkReader) pageFailure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pageErr
}

func (r *chunkReader) failure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ioErr
}

// minValueBits is the fewest bits a PLAIN-encoded value of col takes.
func minValueBits(col *pqschema.Column) int {
	switch col.PhysicalType() {
	case parquet.Types.Boolean:
		return 1
	case parquet.Types.Int32, parquet.Types.Float, parquet.Types.ByteArray: // a byte array's length prefix
		return 32
	case parquet.Types.Int64, parquet.Types.Double:
		return 64
	case parquet.Types.Int96:
		return 96
	case parquet.Types.FixedLenByteArray:
		return 8 * max(col.TypeLength(), 1)
	}
	return 1
}

// sortedUnique sorts xs and drops repeats.
func sortedUnique(xs []int) []int {
	slices.Sort(xs)
	return slices.Compact(xs)
}

// decodedSize estimates the Arrow memory of row group rg's selected
// columns (formats.Unit.Decoded): a fixed-width column exactly, its
// values and, where nullable, its validity bits; any other column by the
// uncompressed size of its column chunks, which for plain-encoded
// strings is their lengths and bytes, as Arrow's offsets and data are.
func decodedSize(rg *metadata.RowGroupMetaData, rows int64, schema *arrow.Schema, selected []string, leaves map[string][]int) int64 {
	var n int64
	for _, c := range selected {
		idx := schema.FieldIndices(c)
		if len(idx) != 1 {
			continue // a missing or doubled column is refused elsewhere
		}
		f := schema.Field(idx[0])
		if fw, ok := f.Type.(arrow.FixedWidthDataType); ok && f.Type.ID() != arrow.DICTIONARY {
			n += (rows*int64(fw.BitWidth()) + 7) / 8
			if f.Nullable {
				n += (rows + 7) / 8
			}
			continue
		}
		for _, leaf := range leaves[c] {
			if cc, err := rg.ColumnChunk(leaf); err == nil {
				n += max(cc.TotalUncompressedSize(), 0)
			}
		}
	}
	return n
}
