// Package orc is the formats driver for Apache ORC files, in pure Go: the
// file tail (postscript, footer, stripe statistics) parsed with protowire,
// compression NONE, ZLIB, SNAPPY, LZO, LZ4 and ZSTD, every column encoding
// of ORC 0.11 and 0.12, decoded straight into Arrow arrays.
//
// A stripe is a unit, with its exact row count from the footer. A read
// fetches the stripe footer and then only the selected columns' streams;
// where a split boundary cuts a stripe and the file has a row index, the
// read starts at the row group that holds the boundary and fetches the
// streams from there (Unit.Paged), so a stripe shared by two ranks is
// fetched about once.
package orc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	_ "time/tzdata" // writers' time zones, on hosts without a zone database

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/storage"
)

// Format reads ORC files: the formats driver for .orc files. The zero value
// is ready to use.
type Format struct {
	// FetchConcurrency is the number of range requests one read keeps in
	// flight. Default 8.
	FetchConcurrency int
}

// Name returns "orc".
func (Format) Name() string { return "orc" }

// Match accepts .orc files.
func (Format) Match(key string) bool { return strings.EqualFold(path.Ext(key), ".orc") }

// tailGuess is how much of a file's end Inspect reads first: the
// postscript, footer and stripe statistics of most files.
func tailGuess(size int64) int64 { return min(max(size/256, 16<<10), 256<<10, size) }

// meta is what Inspect keeps for reads.
type meta struct {
	ps     *postScript
	ft     *footer
	schema *schema
	codec  codec
	// columns maps a top-level column name to its type id.
	columns map[string]int
	// starts[i] is the first row of stripe i; starts[len] is the total.
	starts []int64
	// stripe footers and row indexes, parsed once per plan.
	mu      sync.Mutex
	footers map[int]*stripeFooter
	indexes map[indexKey][][]uint64
	// small stripes' streams, fetched once (see sharedStripe), oldest
	// first in sharedOrder.
	shared      map[sharedKey]*sharedFetch
	sharedOrder []*sharedFetch
	sharedBytes int64
}

type indexKey struct{ stripe, column int }

// Inspect reads and checks the file tail and records each stripe as a unit.
func (Format) Inspect(ctx context.Context, f *formats.Fragment, columns []string) error {
	m, err := readTail(ctx, f)
	if err != nil {
		return err
	}
	fields, err := m.fields()
	if err != nil {
		return fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
	}
	sel := columns
	if sel == nil {
		for _, fl := range fields {
			sel = append(sel, fl.Name)
		}
	}
	// The footer gives no per-column sizes: a selection is charged its share
	// of each stripe's data by how many of the file's columns (types with
	// streams: not a root struct) it holds.
	share := 0
	for _, c := range sel {
		if id, ok := m.columns[c]; ok {
			share += m.schema.last[id] - id + 1
		}
	}
	total := len(m.schema.types)
	if m.schema.types[0].kind == kStruct {
		total--
	}
	share = min(share, total)
	units := make([]formats.Unit, len(m.ft.stripes))
	for i, s := range m.ft.stripes {
		units[i] = formats.Unit{
			Rows:   int64(s.rows),
			Bytes:  int64(s.dataLength)*int64(share)/int64(max(total, 1)) + int64(s.footerLength),
			Offset: int64(s.offset),
			Paged:  m.ft.rowIndexStride > 0,
		}
	}
	f.Units, f.Rows, f.Schema, f.Meta = units, m.starts[len(m.starts)-1], arrow.NewSchema(fields, nil), m
	return nil
}

// RowIndexStride is the rows of a row group of an ORC file planned by this
// driver (0 where the file has no row index, and so stripes are read
// whole), and whether f is such a file.
func RowIndexStride(f *formats.Fragment) (int64, bool) {
	m, ok := f.Meta.(*meta)
	if !ok {
		return 0, false
	}
	return int64(m.ft.rowIndexStride), true
}

// fields are the file's top-level columns: the root struct's fields, or
// one column "_col0" for a file whose root is not a struct.
func (m *meta) fields() ([]arrow.Field, error) {
	root := m.schema.types[0]
	m.columns = map[string]int{}
	if root.kind != kStruct {
		dt, err := m.schema.arrowType(0)
		if err != nil {
			return nil, err
		}
		m.columns["_col0"] = 0
		return []arrow.Field{{Name: "_col0", Type: dt, Nullable: true}}, nil
	}
	out := make([]arrow.Field, len(root.subtypes))
	for i, c := range root.subtypes {
		name := root.fieldNames[i]
		if _, dup := m.columns[name]; dup {
			return nil, fmt.Errorf("%w: the file has more than one column named %q", formats.ErrSchema, name)
		}
		dt, err := m.schema.arrowType(int(c))
		if err != nil {
			return nil, err
		}
		m.columns[name] = int(c)
		out[i] = arrow.Field{Name: name, Type: dt, Nullable: true, Metadata: m.schema.idMetadata(int(c))}
	}
	return out, nil
}

// readTail fetches and parses the postscript, footer and stripe statistics.
func readTail(ctx context.Context, f *formats.Fragment) (*meta, error) {
	if f.Size < 4 {
		return nil, fmt.Errorf("%w: %d bytes is too small for an ORC file", formats.ErrCorrupt, f.Size)
	}
	var key []byte
	if c := f.Cache(); c != nil {
		key = f.CacheKey("orc-tail")
		if tail, err := c.Get(ctx, key); err == nil && len(tail) > 0 {
			return parseTail(tail, f.Size)
		}
	}
	r := f.Source.ReaderAt(ctx)
	buf := make([]byte, tailGuess(f.Size))
	if _, err := r.ReadAt(buf, f.Size-int64(len(buf))); err != nil {
		return nil, err
	}
	need, err := tailLength(buf, f.Size)
	if err != nil {
		return nil, err
	}
	if need > int64(len(buf)) {
		buf = make([]byte, need)
		if _, err := r.ReadAt(buf, f.Size-need); err != nil {
			return nil, err
		}
	}
	tail := buf[int64(len(buf))-need:]
	m, err := parseTail(tail, f.Size)
	if err != nil {
		return nil, err
	}
	if m.ps.magic == "" {
		// The first writers put the magic only at the file's start.
		head := make([]byte, 3)
		if _, err := r.ReadAt(head, 0); err != nil {
			return nil, err
		}
		if string(head) != "ORC" {
			return nil, fmt.Errorf("%w: no ORC magic in the postscript or at the start: not ORC", formats.ErrCorrupt)
		}
	}
	if key != nil {
		_ = f.Cache().Set(ctx, key, tail) // a failed write costs the next plan a read
	}
	return m, nil
}

// tailLength is the length of the file tail (stripe statistics, footer,
// postscript and its length byte) that ends buf, the end of a file.
func tailLength(buf []byte, size int64) (int64, error) {
	psLen := int64(buf[len(buf)-1])
	if psLen == 0 || psLen+1 > int64(len(buf)) {
		return 0, fmt.Errorf("%w: postscript length %d in a file of %d bytes: truncated, or not ORC", formats.ErrCorrupt, psLen, size)
	}
	ps, err := parsePostScript(buf[int64(len(buf))-1-psLen : len(buf)-1])
	if err != nil {
		return 0, fmt.Errorf("%w: postscript: %w", formats.ErrCorrupt, err)
	}
	if ps.magic != "ORC" && ps.magic != "" {
		return 0, fmt.Errorf("%w: no ORC magic in the postscript: truncated, or not ORC", formats.ErrCorrupt)
	}
	n := 1 + psLen
	for _, l := range []uint64{ps.footerLength, ps.metadataLength} {
		if l > uint64(size-n) {
			return 0, fmt.Errorf("%w: a tail of %d more bytes in a file of %d", formats.ErrCorrupt, l, size)
		}
		n += int64(l)
	}
	return n, nil
}

// supportedVersion reports whether ORC's readers would read a file of this
// version: 0.11 and 0.12, and the 2.0 preview ("UNSTABLE-PRE-2.0", 1.9999)
// whose only change sluice reads is decimal64.
func supportedVersion(v []uint32) (ok, preview bool) {
	switch {
	case len(v) == 0:
		return true, false // Hive 0.11 wrote no version
	case len(v) >= 2 && v[0] == 0 && (v[1] == 11 || v[1] == 12):
		return true, false
	case len(v) >= 2 && v[0] == 1 && v[1] == 9999:
		return true, true
	}
	return false, false
}

// parseTail parses a file tail: stripe statistics, footer, postscript, and
// the postscript's length in the last byte.
func parseTail(tail []byte, size int64) (*meta, error) {
	n, err := tailLength(tail, size)
	if err != nil {
		return nil, err
	}
	if n != int64(len(tail)) {
		return nil, fmt.Errorf("%w: a tail of %d bytes where %d were kept", formats.ErrCorrupt, n, len(tail))
	}
	psLen := int(tail[len(tail)-1])
	ps, _ := parsePostScript(tail[len(tail)-1-psLen : len(tail)-1])
	ok, preview := supportedVersion(ps.version)
	if !ok {
		return nil, fmt.Errorf("%w: ORC version %v is not one sluice reads (0.11, 0.12)", formats.ErrCorrupt, ps.version)
	}
	if _, known := compressionNames[ps.compression]; !known {
		return nil, fmt.Errorf("%w: compression kind %d is not known", formats.ErrCorrupt, ps.compression)
	}
	bs := ps.blockSize
	if !ps.hasBlockSize || bs == 0 {
		bs = defaultBlockSize
	}
	if bs > maxBlockSize {
		return nil, fmt.Errorf("%w: compression block size %d", formats.ErrCorrupt, bs)
	}
	m := &meta{ps: ps, codec: codec{kind: ps.compression, blockSize: int(bs)}, footers: map[int]*stripeFooter{}, indexes: map[indexKey][][]uint64{}}
	ftEnd := len(tail) - 1 - psLen
	ftBytes := tail[ftEnd-int(ps.footerLength) : ftEnd]
	mdBytes := tail[ftEnd-int(ps.footerLength)-int(ps.metadataLength) : ftEnd-int(ps.footerLength)]
	raw, err := m.codec.decompress(nil, ftBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: footer (%s): %w", formats.ErrCorrupt, compressionNames[ps.compression], err)
	}
	ft, err := parseFooter(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: footer: %w", formats.ErrCorrupt, err)
	}
	if ft.encrypted {
		return nil, fmt.Errorf("%w: the file has encrypted columns; encrypted ORC files are not supported", formats.ErrCorrupt)
	}
	m.ft = ft
	if m.schema, err = newSchema(ft.types); err != nil {
		return nil, fmt.Errorf("%w: footer: %w", formats.ErrCorrupt, err)
	}
	m.schema.decimal64 = preview
	if len(mdBytes) > 0 {
		raw, err := m.codec.decompress(nil, mdBytes)
		if err != nil {
			return nil, fmt.Errorf("%w: stripe statistics: %w", formats.ErrCorrupt, err)
		}
		if n, err := countStripeStats(raw); err != nil {
			return nil, fmt.Errorf("%w: stripe statistics: %w", formats.ErrCorrupt, err)
		} else if n != 0 && n != len(ft.stripes) {
			return nil, fmt.Errorf("%w: stripe statistics for %d stripes of %d", formats.ErrCorrupt, n, len(ft.stripes))
		}
	}
	m.starts = make([]int64, len(ft.stripes)+1)
	dataEnd := uint64(size) - uint64(len(tail))
	var prevEnd uint64
	for i, s := range ft.stripes {
		if s.rows > math.MaxInt64/2 || int64(s.rows) > math.MaxInt64/2-m.starts[i] {
			return nil, fmt.Errorf("%w: stripe %d: row count %d", formats.ErrCorrupt, i, s.rows)
		}
		end := s.offset + s.indexLength + s.dataLength + s.footerLength
		if s.offset < prevEnd || end < s.offset || end > dataEnd || s.indexLength > end || s.dataLength > end || s.footerLength > end {
			return nil, fmt.Errorf("%w: stripe %d at bytes %d+%d+%d+%d lies outside the data (before byte %d) or overlaps the stripe before", formats.ErrCorrupt, i, s.offset, s.indexLength, s.dataLength, s.footerLength, dataEnd)
		}
		prevEnd = end
		m.starts[i+1] = m.starts[i] + int64(s.rows)
	}
	// Some writers left the file's count out (0): the stripes' is used.
	if ft.rows != 0 && ft.rows != uint64(m.starts[len(ft.stripes)]) {
		return nil, fmt.Errorf("%w: the footer counts %d rows, its stripes %d", formats.ErrCorrupt, ft.rows, m.starts[len(ft.stripes)])
	}
	return m, nil
}

// stripeFooter fetches (once per plan) and parses stripe i's footer.
func (m *meta) stripeFooter(ctx context.Context, f *formats.Fragment, i int) (*stripeFooter, error) {
	m.mu.Lock()
	sf := m.footers[i]
	m.mu.Unlock()
	if sf != nil {
		return sf, nil
	}
	s := m.ft.stripes[i]
	stored := make([]byte, s.footerLength)
	if _, err := f.Source.ReaderAt(ctx).ReadAt(stored, int64(s.offset+s.indexLength+s.dataLength)); err != nil {
		return nil, err
	}
	raw, err := m.codec.decompress(nil, stored)
	if err != nil {
		return nil, fmt.Errorf("%w: stripe %d footer: %w", formats.ErrCorrupt, i, err)
	}
	if sf, err = parseStripeFooter(raw); err != nil {
		return nil, fmt.Errorf("%w: stripe %d footer: %w", formats.ErrCorrupt, i, err)
	}
	if err := m.checkStripeFooter(i, sf); err != nil {
		return nil, fmt.Errorf("%w: stripe %d footer: %w", formats.ErrCorrupt, i, err)
	}
	m.mu.Lock()
	m.footers[i] = sf
	m.mu.Unlock()
	return sf, nil
}

func (m *meta) checkStripeFooter(i int, sf *stripeFooter) error {
	if sf.encrypted {
		return errors.New("the stripe has encrypted columns; encrypted ORC files are not supported")
	}
	s := m.ft.stripes[i]
	var total uint64
	for _, st := range sf.streams {
		if st.column >= uint64(len(m.schema.types)) {
			return fmt.Errorf("a stream of column %d, of a schema of %d", st.column, len(m.schema.types))
		}
		if st.length > s.indexLength+s.dataLength-total {
			return fmt.Errorf("streams of more than the stripe's %d bytes", s.indexLength+s.dataLength)
		}
		total += st.length
	}
	if total != s.indexLength+s.dataLength {
		return fmt.Errorf("streams of %d bytes in a stripe of %d", total, s.indexLength+s.dataLength)
	}
	if len(sf.columns) != len(m.schema.types) {
		return fmt.Errorf("%d column encodings for %d columns", len(sf.columns), len(m.schema.types))
	}
	if sf.writerTZ != "" {
		if _, err := time.LoadLocation(sf.writerTZ); err != nil {
			return fmt.Errorf("writer time zone %q: %w", sf.writerTZ, err)
		}
	}
	return nil
}

// dataStream reports whether a stream kind holds column values (not an
// index).
func dataStream(kind uint64) bool {
	switch kind {
	case sPresent, sData, sLength, sDictionaryData, sSecondary:
		return true
	}
	return false
}

// byteRange is [from, to) of a file.
type byteRange struct{ from, to int64 }

// streamPart is the part of a stream a read fetches: [from, to) of the
// file, full when it is the whole stream.
type streamPart struct {
	key      streamKey
	from, to int64
	full     bool
}

// stripeRead is the part of one stripe a read decodes.
type stripeRead struct {
	stripe int
	// lo, hi are the rows of the stripe to deliver; first is the row the
	// fetched streams start at (0, or a row group's first row).
	lo, hi, first int64
	sf            *stripeFooter
	parts         []streamPart
	// seek holds, when first > 0, each stream's position past its start.
	seek map[streamKey][]uint64
}

// fetched is what Fetch hands to Decode.
type fetched struct {
	stripes []*stripeRead
	spans   []span
	bytes   int64
	// The engine decodes a fetch in parts (its windows' pieces), each
	// from the row group it starts in: the streams are decompressed once,
	// for all of them, and kept while the fetch is (up to maxDecoded
	// bytes).
	mu      sync.Mutex
	decoded map[partKey]*decodedPart
	held    int64
}

// maxDecoded bounds the decompressed streams one fetch keeps.
const maxDecoded = 64 << 20

type partKey struct {
	stripe int
	key    streamKey
}

// decodedPart is a fetched stream part decompressed, and where each of its
// compression chunks starts.
type decodedPart struct {
	from   int64
	raw    []byte
	starts []chunkStart
}

// streamBytes is the decoded bytes of part p of a stream of stripe, from
// p's start to the end of what was fetched of the stream: decompressed
// once per fetch where p lies in a part Fetch fetched (at a chunk start,
// as the row index places it), else on their own.
func (fe *fetched) streamBytes(c codec, stripe int, p streamPart) ([]byte, error) {
	var base *streamPart
	for _, fsr := range fe.stripes {
		if fsr.stripe != stripe {
			continue
		}
		for i := range fsr.parts {
			if fsr.parts[i].key == p.key {
				base = &fsr.parts[i]
			}
		}
	}
	if base == nil || p.from < base.from || p.to > base.to {
		return decodeOwn(c, fe, p)
	}
	k := partKey{stripe, p.key}
	fe.mu.Lock()
	d := fe.decoded[k]
	fe.mu.Unlock()
	if d == nil {
		stored := fe.bytesAt(base.from, base.to)
		if stored == nil {
			return nil, fmt.Errorf("bytes [%d, %d) were not fetched", base.from, base.to)
		}
		d = &decodedPart{from: base.from}
		var err error
		switch {
		case c.kind == compNone:
			d.raw = stored // decoders only read it
		case base.full:
			d.raw, err = c.decompressChunks(nil, stored, &d.starts)
		default:
			d.raw, err = c.decompressChunks(nil, stored[:c.wholeChunks(stored)], &d.starts)
		}
		if err != nil {
			return nil, fmt.Errorf("bytes %d to %d: %w", base.from, base.to, err)
		}
		fe.mu.Lock()
		if c.kind != compNone && fe.held+int64(len(d.raw)) <= maxDecoded {
			if fe.decoded == nil {
				fe.decoded = map[partKey]*decodedPart{}
			}
			if fe.decoded[k] == nil {
				fe.decoded[k] = d
				fe.held += int64(len(d.raw))
			}
		}
		fe.mu.Unlock()
	}
	if p.from == d.from {
		return d.raw, nil
	}
	at := p.from - d.from
	if c.kind == compNone {
		return d.raw[at:], nil
	}
	i, ok := slices.BinarySearchFunc(d.starts, int(at), func(s chunkStart, at int) int { return cmp.Compare(s.at, at) })
	if !ok {
		return nil, fmt.Errorf("row index offset %d is not the start of a compression chunk", at)
	}
	return d.raw[d.starts[i].raw:], nil
}

// decodeOwn decompresses part p alone.
func decodeOwn(c codec, fe *fetched, p streamPart) ([]byte, error) {
	stored := fe.bytesAt(p.from, p.to)
	if stored == nil {
		return nil, fmt.Errorf("bytes [%d, %d) were not fetched", p.from, p.to)
	}
	var raw []byte
	var err error
	if p.full {
		raw, err = c.decompress(nil, stored)
	} else {
		raw, err = c.decompressPrefix(stored)
	}
	if err != nil {
		return nil, fmt.Errorf("bytes %d to %d: %w", p.from, p.to, err)
	}
	return raw, nil
}

type span struct {
	off  int64
	data []byte
}

// Size is the memory the fetched streams hold.
func (fe *fetched) Size() int64 { return fe.bytes }

// bytesAt returns [from, to) of the file from the spans, or nil.
func (fe *fetched) bytesAt(from, to int64) []byte {
	for _, sp := range fe.spans {
		if from >= sp.off && to <= sp.off+int64(len(sp.data)) {
			return sp.data[from-sp.off : to-sp.off]
		}
	}
	return nil
}

// selectedIDs are the type ids of the read's columns and their subtrees.
func (m *meta) selectedIDs(schema *arrow.Schema) ([]int, error) {
	var ids []int
	for _, fl := range schema.Fields() {
		id, ok := m.columns[fl.Name]
		if !ok {
			return nil, fmt.Errorf("%w: column %q is not in the file", formats.ErrSchema, fl.Name)
		}
		for c := id; c <= m.schema.last[id]; c++ {
			ids = append(ids, c)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// Fetch fetches the stripe footers and the selected columns' streams of the
// stripes that hold the read's rows.
func (o Format) Fetch(ctx context.Context, f *formats.Fragment, r *formats.Read) (formats.Buffer, error) {
	m := f.Meta.(*meta)
	ids, err := m.selectedIDs(r.Schema)
	if err != nil {
		return nil, err
	}
	fe := &fetched{}
	var ranges []byteRange
	var indexes []stripeIndexes
	var shared []span
	for i := range m.ft.stripes {
		first, last := m.starts[i], m.starts[i+1]
		if last <= r.Range.Start || first >= r.Range.End || first == last {
			continue
		}
		lo, hi := max(r.Range.Start, first)-first, min(r.Range.End, last)-first
		if (lo > 0 || hi < last-first) && m.smallStripe(i) {
			sr, spans, err := m.sharedStripe(ctx, f, i, ids, lo, hi, o.FetchConcurrency)
			if err != nil {
				return nil, err
			}
			fe.stripes = append(fe.stripes, sr)
			shared = append(shared, spans...)
			continue
		}
		sr, err := m.planStripe(ctx, f, i, ids, lo, hi)
		if err != nil {
			return nil, err
		}
		fe.stripes = append(fe.stripes, sr)
		for _, p := range sr.parts {
			ranges = append(ranges, byteRange{p.from, p.to})
		}
		// Streams of several row groups are decoded in parts, each from
		// its row group (see seekFetched): their row index comes with them.
		if stride := int64(m.ft.rowIndexStride); stride > 0 && sr.hi-sr.first > stride {
			if missing := m.missingIndexes(i, ids); len(missing) > 0 {
				if where := m.indexStreams(i, sr.sf, missing); len(where) == len(missing) {
					indexes = append(indexes, stripeIndexes{i, where})
					for _, br := range where {
						ranges = append(ranges, br)
					}
				}
			}
		}
	}
	if fe.spans, err = fetchRanges(ctx, f.Source.ReaderAt(ctx), coalesce(ranges), o.FetchConcurrency); err != nil {
		return nil, err
	}
	fe.spans = append(fe.spans, shared...)
	for _, sp := range fe.spans {
		fe.bytes += int64(len(sp.data))
	}
	for _, si := range indexes {
		// An index that does not parse leaves the parts to be decoded
		// from the fetch's start, as a read without one is.
		_ = m.keepIndexes(si.stripe, si.where, fe)
	}
	return fe, nil
}

// A small stripe (its streams a compression block or so each) gains
// little from a read of part of it: a part fetches whole blocks, about
// the stripe, and each read that cuts it (a rank's splits, the windows of
// a split) would fetch it again. Such a stripe is fetched whole, with its
// row index, once per plan, and the reads of its parts share that fetch
// while it is among the plan's last maxShared bytes of them.
const (
	smallStripeBytes = 256 << 10
	maxShared        = 8 << 20
)

func (m *meta) smallStripe(i int) bool {
	s := m.ft.stripes[i]
	return m.ft.rowIndexStride > 0 && s.indexLength+s.dataLength <= smallStripeBytes
}

// sharedFetch is a small stripe's streams, fetched once for the plan's
// reads of columns ids.
type sharedFetch struct {
	key   sharedKey
	done  chan struct{} // closed once spans or err is set
	spans []span
	bytes int64
	err   error
}

type sharedKey struct {
	stripe int
	ids    string
}

// sharedStripe returns the read of rows [lo, hi) of small stripe i from
// its whole streams, and their bytes: fetched by the first read of the
// stripe's columns ids, which the others wait for.
func (m *meta) sharedStripe(ctx context.Context, f *formats.Fragment, i int, ids []int, lo, hi int64, concurrency int) (*stripeRead, []span, error) {
	sf, err := m.stripeFooter(ctx, f, i)
	if err != nil {
		return nil, nil, err
	}
	sr := m.wholeStreams(i, sf, ids, lo, hi)
	key := sharedKey{i, fmt.Sprint(ids)}
	m.mu.Lock()
	sh := m.shared[key]
	owner := sh == nil
	if owner {
		sh = &sharedFetch{key: key, done: make(chan struct{})}
		if m.shared == nil {
			m.shared = map[sharedKey]*sharedFetch{}
		}
		m.shared[key] = sh
		m.sharedOrder = append(m.sharedOrder, sh)
	}
	m.mu.Unlock()
	if owner {
		sh.spans, sh.err = m.fetchShared(ctx, f, sr, ids, concurrency)
		m.mu.Lock()
		if sh.err != nil {
			delete(m.shared, key) // a later read tries again
		}
		for _, sp := range sh.spans {
			sh.bytes += int64(len(sp.data))
		}
		m.sharedBytes += sh.bytes
		// The oldest go first; a read that holds their spans keeps them.
		for m.sharedBytes > maxShared && len(m.sharedOrder) > 1 {
			old := m.sharedOrder[0]
			m.sharedOrder = m.sharedOrder[1:]
			if m.shared[old.key] == old {
				delete(m.shared, old.key)
			}
			m.sharedBytes -= old.bytes
		}
		m.mu.Unlock()
		close(sh.done)
	} else {
		select {
		case <-sh.done:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	if sh.err != nil {
		if !owner && ctx.Err() == nil && !errors.Is(sh.err, context.Canceled) {
			return nil, nil, sh.err
		}
		if !owner && ctx.Err() == nil {
			// The read that fetched for all was cancelled, not this one.
			return m.sharedStripe(ctx, f, i, ids, lo, hi, concurrency)
		}
		return nil, nil, sh.err
	}
	return sr, sh.spans, nil
}

// fetchShared fetches the streams of sr, a whole stripe's, and the
// stripe's row index where the plan has not parsed it.
func (m *meta) fetchShared(ctx context.Context, f *formats.Fragment, sr *stripeRead, ids []int, concurrency int) ([]span, error) {
	var ranges []byteRange
	for _, p := range sr.parts {
		ranges = append(ranges, byteRange{p.from, p.to})
	}
	var where map[int]byteRange
	if missing := m.missingIndexes(sr.stripe, ids); len(missing) > 0 {
		if where = m.indexStreams(sr.stripe, sr.sf, missing); len(where) == len(missing) {
			for _, br := range where {
				ranges = append(ranges, br)
			}
		} else {
			where = nil
		}
	}
	spans, err := fetchRanges(ctx, f.Source.ReaderAt(ctx), coalesce(ranges), concurrency)
	if err != nil {
		return nil, err
	}
	if where != nil {
		// See Fetch: an index that does not parse is not used.
		_ = m.keepIndexes(sr.stripe, where, &fetched{spans: spans})
	}
	return spans, nil
}

// stripeIndexes places the row index streams of a stripe that a fetch
// brings.
type stripeIndexes struct {
	stripe int
	where  map[int]byteRange
}

// planStripe works out which bytes of stripe i rows [lo, hi) need.
func (m *meta) planStripe(ctx context.Context, f *formats.Fragment, i int, ids []int, lo, hi int64) (*stripeRead, error) {
	sf, err := m.stripeFooter(ctx, f, i)
	if err != nil {
		return nil, err
	}
	sr := m.wholeStreams(i, sf, ids, lo, hi)
	s := m.ft.stripes[i]
	stride := int64(m.ft.rowIndexStride)
	if stride <= 0 || (lo < stride && hi > int64(s.rows)-stride) {
		return sr, nil // no index, or no row group to leave out
	}
	if err := m.seekStripe(ctx, f, sr, ids); err != nil {
		if errors.Is(err, errNoIndex) {
			return sr, nil // read the stripe whole
		}
		return nil, err
	}
	return sr, nil
}

// wholeStreams is the read of rows [lo, hi) of stripe i from the whole
// streams of columns ids.
func (m *meta) wholeStreams(i int, sf *stripeFooter, ids []int, lo, hi int64) *stripeRead {
	sr := &stripeRead{stripe: i, lo: lo, hi: hi, sf: sf}
	at := int64(m.ft.stripes[i].offset)
	for _, st := range sf.streams {
		if slices.Contains(ids, int(st.column)) && dataStream(st.kind) && st.length > 0 {
			k := streamKey{uint32(st.column), st.kind}
			sr.parts = append(sr.parts, streamPart{key: k, from: at, to: at + int64(st.length), full: true})
		}
		at += int64(st.length)
	}
	return sr
}

var errNoIndex = errors.New("no row index")

// seekFetched narrows sr, a read of fetched streams, to start at the row
// group that holds sr.lo where rows before it would otherwise be decoded
// and dropped: the engine decodes a fetch in parts, and each part would
// decode the stripe from the fetch's start. It needs the stripe's row
// index already parsed (Fetch reads it with a stripe's streams when they
// hold several row groups); nil where it cannot narrow.
func (m *meta) seekFetched(sr *stripeRead, ids []int) *stripeRead {
	stride := int64(m.ft.rowIndexStride)
	if stride <= 0 || sr.lo-sr.first < stride {
		return nil
	}
	idx := map[int][][]uint64{}
	m.mu.Lock()
	for _, id := range ids {
		idx[id] = m.indexes[indexKey{sr.stripe, id}]
	}
	m.mu.Unlock()
	for _, e := range idx {
		if e == nil {
			return nil
		}
	}
	n := &stripeRead{stripe: sr.stripe, lo: sr.lo, hi: sr.hi, sf: sr.sf}
	read := map[streamKey]bool{}
	for _, p := range sr.parts {
		read[p.key] = true
	}
	at := int64(m.ft.stripes[sr.stripe].offset)
	for _, st := range sr.sf.streams {
		k := streamKey{uint32(st.column), st.kind}
		if read[k] && dataStream(st.kind) && st.length > 0 {
			n.parts = append(n.parts, streamPart{key: k, from: at, to: at + int64(st.length), full: true})
		}
		at += int64(st.length)
	}
	if len(n.parts) != len(sr.parts) || m.narrow(n, ids, idx) != nil || n.first <= sr.first {
		return nil
	}
	for i, p := range n.parts {
		if q := sr.parts[i]; q.key != p.key || p.from < q.from {
			return nil // not within what was fetched
		}
		n.parts[i].to = min(p.to, sr.parts[i].to)
	}
	partSeeks.Add(1)
	return n
}

// partSeeks counts, for tests, the parts of fetches seekFetched narrowed.
var partSeeks atomic.Int64

// Counts for tests: stripes read from a row group, and those of them that
// had to be read again whole.
var seeks, reseeks atomic.Int64

// seekStripe narrows sr's streams to the row groups that hold rows
// [sr.lo, sr.hi), with the positions the row index gives.
func (m *meta) seekStripe(ctx context.Context, f *formats.Fragment, sr *stripeRead, ids []int) error {
	idx, err := m.rowIndex(ctx, f, sr.stripe, sr.sf, ids)
	if err != nil {
		return err
	}
	if err := m.narrow(sr, ids, idx); err != nil {
		return err
	}
	seeks.Add(1)
	return nil
}

// narrow narrows sr's streams, whole streams of its stripe, to the row
// groups that hold rows [sr.lo, sr.hi), with the positions of idx, the
// row index entries of columns ids.
func (m *meta) narrow(sr *stripeRead, ids []int, idx map[int][][]uint64) error {
	stride := int64(m.ft.rowIndexStride)
	rows := int64(m.ft.stripes[sr.stripe].rows)
	g0 := sr.lo / stride
	g1 := (sr.hi + stride - 1) / stride // first group not needed
	groups := (rows + stride - 1) / stride
	seek := map[streamKey][]uint64{}
	starts := map[streamKey][2]int64{} // stream-relative [from, to)
	compressed := m.codec.kind != compNone
	for _, id := range ids {
		entries := idx[id]
		if int64(len(entries)) != groups {
			return fmt.Errorf("%w: stripe %d column %d: %d row index entries for %d row groups", errNoIndex, sr.stripe, id, len(entries), groups)
		}
		layout := m.schema.layout(id, sr.sf)
		// offsets[s][g] is stream s's byte offset (of its compressed
		// chunk, or of the value) where row group g starts; inBlock[s] and
		// inRun[s] say whether group g1 starts inside a block or a run,
		// so that the group before it needs bytes after that offset.
		offsets := make([][]int64, len(layout))
		inBlock, inRun := make([]bool, len(layout)), make([]bool, len(layout))
		for g := g0; g < groups; g++ {
			pos := entries[g]
			for s, ps := range layout {
				need := ps.extra + 1
				if compressed {
					need++
				}
				if len(pos) < need {
					// Some writers leave a group's positions out: such a
					// stripe is read whole.
					return fmt.Errorf("%w: stripe %d column %d: row index entry %d has too few positions", errNoIndex, sr.stripe, id, g)
				}
				k := streamKey{uint32(id), ps.kind}
				if g == g0 {
					if compressed {
						seek[k] = pos[1:need]
					} else {
						seek[k] = append([]uint64{0}, pos[1:need]...)
					}
				}
				if g == g1 {
					runAt := 1
					if compressed {
						inBlock[s] = pos[1] != 0
						runAt = 2
					}
					for _, p := range pos[runAt:need] {
						inRun[s] = inRun[s] || p != 0
					}
				}
				if pos[0] > math.MaxInt64/4 {
					return fmt.Errorf("%w: stripe %d column %d: row index offset %d", formats.ErrCorrupt, sr.stripe, id, pos[0])
				}
				offsets[s] = append(offsets[s], int64(pos[0]))
				pos = pos[need:]
			}
		}
		for s, ps := range layout {
			k := streamKey{uint32(id), ps.kind}
			offs := offsets[s]
			end := int64(-1) // to the stream's end
			if g1 < groups {
				at := offs[g1-g0]
				switch {
				case !compressed && !inRun[s]:
					end = at
				case !compressed:
					end = at + 16<<10 // the rest of a run
				default:
					// Blocks are decompressed whole: the group before g1
					// needs the block g1 starts in if g1 starts inside it,
					// and the one after if g1 starts inside a run, which
					// may reach into it.
					blocks := 0
					if inRun[s] {
						blocks = 2
					} else if inBlock[s] {
						blocks = 1
					}
					end = at
					for _, o := range offs[g1-g0+1:] {
						if blocks == 0 {
							break
						}
						if o > end {
							end = o
							blocks--
						}
					}
					if blocks > 0 {
						end = -1
					}
				}
			}
			starts[k] = [2]int64{offs[0], end}
		}
	}
	for j, p := range sr.parts {
		se, ok := starts[p.key]
		if !ok {
			continue
		}
		from, to := p.from+se[0], p.to
		if se[1] >= 0 && p.from+se[1] < to {
			to = p.from + se[1]
		}
		if from > p.to {
			return fmt.Errorf("%w: stripe %d column %d: row index position %d past the stream's %d bytes", formats.ErrCorrupt, sr.stripe, p.key.column, se[0], p.to-p.from)
		}
		to = max(to, from)
		sr.parts[j] = streamPart{key: p.key, from: from, to: to, full: from == p.from && to == p.to}
	}
	sr.first = g0 * stride
	sr.seek = seek
	return nil
}

// posStream is one stream in a row index entry's positions: extra is the
// positions after the stream's byte offset (run values, bits).
type posStream struct {
	kind  uint64
	extra int
}

// layout lists the streams of column id in the order of its row index
// positions.
func (s *schema) layout(id int, sf *stripeFooter) []posStream {
	var out []posStream
	for _, st := range sf.streams {
		if st.column == uint64(id) && st.kind == sPresent {
			out = append(out, posStream{sPresent, 2})
			break
		}
	}
	enc := sf.columns[id].kind
	switch s.types[id].kind {
	case kBoolean:
		out = append(out, posStream{sData, 2})
	case kByte, kUnion:
		out = append(out, posStream{sData, 1})
	case kShort, kInt, kLong, kDate:
		out = append(out, posStream{sData, 1})
	case kFloat, kDouble:
		out = append(out, posStream{sData, 0})
	case kString, kVarchar, kChar, kBinary:
		if enc == eDictionary || enc == eDictionaryV2 {
			out = append(out, posStream{sData, 1})
		} else {
			out = append(out, posStream{sData, 0}, posStream{sLength, 1})
		}
	case kTimestamp, kTimestampInstant:
		out = append(out, posStream{sData, 1}, posStream{sSecondary, 1})
	case kDecimal:
		if s.decimal64 && s.types[id].precision <= 18 && s.types[id].precision > 0 {
			out = append(out, posStream{sData, 1})
		} else {
			out = append(out, posStream{sData, 0}, posStream{sSecondary, 1})
		}
	case kList, kMap:
		out = append(out, posStream{sLength, 1})
	}
	return out
}

// rowIndex fetches (once per plan) the ROW_INDEX streams of columns ids of
// stripe i.
func (m *meta) rowIndex(ctx context.Context, f *formats.Fragment, i int, sf *stripeFooter, ids []int) (map[int][][]uint64, error) {
	out := map[int][][]uint64{}
	var missing []int
	m.mu.Lock()
	for _, id := range ids {
		if e, ok := m.indexes[indexKey{i, id}]; ok {
			out[id] = e
		} else {
			missing = append(missing, id)
		}
	}
	m.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	where := m.indexStreams(i, sf, missing)
	if len(where) != len(missing) {
		return nil, errNoIndex
	}
	var ranges []byteRange
	for _, br := range where {
		ranges = append(ranges, br)
	}
	spans, err := fetchRanges(ctx, f.Source.ReaderAt(ctx), coalesce(ranges), 8)
	if err != nil {
		return nil, err
	}
	if err := m.keepIndexes(i, where, &fetched{spans: spans}); err != nil {
		return nil, err
	}
	for _, id := range missing {
		out[id] = m.indexes[indexKey{i, id}]
	}
	return out, nil
}

// indexStreams places the ROW_INDEX streams of columns ids of stripe i.
func (m *meta) indexStreams(i int, sf *stripeFooter, ids []int) map[int]byteRange {
	at := int64(m.ft.stripes[i].offset)
	where := map[int]byteRange{}
	for _, st := range sf.streams {
		if st.kind == sRowIndex && slices.Contains(ids, int(st.column)) {
			where[int(st.column)] = byteRange{at, at + int64(st.length)}
		}
		at += int64(st.length)
	}
	return where
}

// keepIndexes parses the row index streams where places, from fe, and
// keeps them for the plan.
func (m *meta) keepIndexes(i int, where map[int]byteRange, fe *fetched) error {
	out := map[int][][]uint64{}
	for id, br := range where {
		raw, err := m.codec.decompress(nil, fe.bytesAt(br.from, br.to))
		if err != nil {
			return fmt.Errorf("%w: stripe %d column %d: row index: %w", formats.ErrCorrupt, i, id, err)
		}
		e, err := parseRowIndex(raw)
		if err != nil {
			return fmt.Errorf("%w: stripe %d column %d: row index: %w", formats.ErrCorrupt, i, id, err)
		}
		out[id] = e
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, e := range out {
		m.indexes[indexKey{i, id}] = e
	}
	return nil
}

// missingIndexes are the columns of ids whose row index of stripe i the
// plan does not hold yet.
func (m *meta) missingIndexes(i int, ids []int) []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for _, id := range ids {
		if _, ok := m.indexes[indexKey{i, id}]; !ok {
			out = append(out, id)
		}
	}
	return out
}

// coalesce sorts ranges and joins those that overlap or touch.
func coalesce(ranges []byteRange) []byteRange {
	slices.SortFunc(ranges, func(a, b byteRange) int { return cmp.Compare(a.from, b.from) })
	var out []byteRange
	for _, r := range ranges {
		if n := len(out); n > 0 && r.from <= out[n-1].to {
			out[n-1].to = max(out[n-1].to, r.to)
			continue
		}
		out = append(out, r)
	}
	return out
}

// fetchRanges fetches ranges with up to concurrency (default 8) requests
// in flight.
func fetchRanges(ctx context.Context, rd *storage.Reader, ranges []byteRange, concurrency int) ([]span, error) {
	if concurrency <= 0 {
		concurrency = 8
	}
	spans := make([]span, len(ranges))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	rd = rd.WithContext(gctx)
	for i, br := range ranges {
		spans[i] = span{br.from, make([]byte, br.to-br.from)}
		g.Go(func() error {
			_, err := rd.ReadAt(spans[i].data, br.from)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return spans, nil
}

// Decode delivers the read's rows, stripe by stripe, from what Fetch
// fetched.
func (o Format) Decode(ctx context.Context, f *formats.Fragment, buf formats.Buffer, r *formats.Read) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		if r.Range.Start == r.Range.End {
			return
		}
		fe, _ := buf.(*fetched)
		if fe == nil {
			b, err := o.Fetch(ctx, f, r)
			if err != nil {
				yield(nil, err)
				return
			}
			fe = b.(*fetched)
		}
		m := f.Meta.(*meta)
		ids, err := m.selectedIDs(r.Schema)
		if err != nil {
			yield(nil, err)
			return
		}
		stopped := errors.New("stopped")
		for _, fsr := range fe.stripes {
			// The fetch may hold more than this read (a reader fetches
			// adjacent ranges at once and decodes each on its own).
			first := m.starts[fsr.stripe]
			lo, hi := max(r.Range.Start-first, fsr.lo), min(r.Range.End-first, fsr.hi)
			if lo >= hi {
				continue
			}
			sr := *fsr
			sr.lo, sr.hi = lo, hi
			if n := m.seekFetched(&sr, ids); n != nil {
				sr = *n
			}
			err := m.decodeStripe(ctx, &sr, fe, r, func(b arrow.RecordBatch) error {
				if !yield(b, nil) {
					return stopped
				}
				return nil
			})
			if err != nil && sr.first > 0 && !errors.Is(err, stopped) && ctx.Err() == nil {
				// A read that started at a row group could not decode what
				// it fetched: read the stripe whole, which reports the
				// file's own error if there is one.
				reseeks.Add(1)
				err = o.wholeStripe(ctx, f, m, &sr, r, func(b arrow.RecordBatch) error {
					if !yield(b, nil) {
						return stopped
					}
					return nil
				})
			}
			if errors.Is(err, stopped) {
				return
			}
			if err != nil {
				yield(nil, fmt.Errorf("stripe %d: %w", sr.stripe, err))
				return
			}
		}
	}
}

// wholeStripe reads the stripe of sr from its start, refetching every
// stream whole. Nothing of sr was delivered yet: a decode error comes
// before the first batch of a stripe (see decodeStripe).
func (o Format) wholeStripe(ctx context.Context, f *formats.Fragment, m *meta, sr *stripeRead, r *formats.Read, yield func(arrow.RecordBatch) error) error {
	whole := &stripeRead{stripe: sr.stripe, lo: sr.lo, hi: sr.hi, sf: sr.sf}
	s := m.ft.stripes[sr.stripe]
	at := int64(s.offset)
	var ranges []byteRange
	keys := map[streamKey]bool{}
	for _, p := range sr.parts {
		keys[p.key] = true
	}
	for _, st := range sr.sf.streams {
		k := streamKey{uint32(st.column), st.kind}
		if keys[k] && dataStream(st.kind) {
			whole.parts = append(whole.parts, streamPart{key: k, from: at, to: at + int64(st.length), full: true})
			ranges = append(ranges, byteRange{at, at + int64(st.length)})
		}
		at += int64(st.length)
	}
	spans, err := fetchRanges(ctx, f.Source.ReaderAt(ctx), coalesce(ranges), o.FetchConcurrency)
	if err != nil {
		return err
	}
	return m.decodeStripe(ctx, whole, &fetched{spans: spans}, r, yield)
}

// decodeStripe decodes rows [sr.lo, sr.hi) of a stripe. It decodes the
// whole of its rows before delivering any, only where a read starts at a
// row group (so that a failed one can be read again whole); else batch
// by batch.
func (m *meta) decodeStripe(ctx context.Context, sr *stripeRead, fe *fetched, r *formats.Read, yield func(arrow.RecordBatch) error) error {
	st := &stripeStreams{data: map[streamKey][]byte{}, seek: sr.seek, enc: sr.sf.columns}
	if sr.sf.writerTZ != "" {
		loc, err := time.LoadLocation(sr.sf.writerTZ)
		if err != nil {
			return fmt.Errorf("%w: writer time zone %q: %w", formats.ErrCorrupt, sr.sf.writerTZ, err)
		}
		st.tz = loc
	}
	for _, p := range sr.parts {
		raw, err := fe.streamBytes(m.codec, sr.stripe, p)
		if err != nil {
			return fmt.Errorf("%w: column %d stream %d: %w", formats.ErrCorrupt, p.key.column, p.key.kind, err)
		}
		if sk := st.seek[p.key]; len(sk) > 0 {
			// The first position is the value's offset in the decompressed
			// block the stream now starts at.
			if sk[0] > uint64(len(raw)) {
				return fmt.Errorf("%w: column %d stream %d: row index offset %d past the %d bytes", formats.ErrCorrupt, p.key.column, p.key.kind, sk[0], len(raw))
			}
			raw = raw[sk[0]:]
		}
		st.data[p.key] = raw
	}
	if sr.seek != nil {
		// Decoders skip what is left of each run after the offset.
		trimmed := map[streamKey][]uint64{}
		for k, v := range sr.seek {
			if len(v) > 0 {
				trimmed[k] = v[1:]
			}
		}
		st.seek = trimmed
	}
	cols := make([]column, r.Schema.NumFields())
	for i, fl := range r.Schema.Fields() {
		id := m.columns[fl.Name]
		c, err := m.schema.newColumn(id, fl.Name, st, r.Mem)
		if err != nil {
			return fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
		}
		cols[i] = c
	}
	// Rows before lo are decoded and dropped.
	for skip := sr.lo - sr.first; skip > 0; {
		n := min(skip, int64(max(r.BatchRows, 1024)))
		for i, c := range cols {
			a, err := c.next(int(n), nil)
			if err != nil {
				return fmt.Errorf("%w: column %q: %w", formats.ErrCorrupt, r.Schema.Field(i).Name, err)
			}
			a.Release()
		}
		skip -= n
	}
	var held []arrow.RecordBatch
	defer func() {
		for _, b := range held {
			b.Release()
		}
	}()
	for at := sr.lo; at < sr.hi; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(sr.hi-at, int64(r.BatchRows))
		b, err := batch(ctx, cols, int(n), r.Schema, r.Mem)
		if err != nil {
			return err
		}
		at += n
		if sr.first > 0 {
			held = append(held, b)
			continue
		}
		if err := yield(b); err != nil {
			return err
		}
	}
	for len(held) > 0 {
		b := held[0]
		held = held[1:]
		if err := yield(b); err != nil {
			return err
		}
	}
	return nil
}

// batch decodes the next n rows of every column, widened to schema's
// types where files were unified to wider ones.
func batch(ctx context.Context, cols []column, n int, schema *arrow.Schema, mem memory.Allocator) (arrow.RecordBatch, error) {
	arrs := make([]arrow.Array, len(cols))
	defer func() {
		for _, a := range arrs {
			if a != nil {
				a.Release()
			}
		}
	}()
	for i, c := range cols {
		a, err := c.next(n, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: column %q: %w", formats.ErrCorrupt, schema.Field(i).Name, err)
		}
		if a, err = formats.Widen(ctx, a, schema.Field(i), mem); err != nil {
			return nil, err
		}
		arrs[i] = a
	}
	return array.NewRecordBatch(schema, arrs, int64(n)), nil
}
