package text

import (
	"context"
	"fmt"
	"io"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/formats"
)

// The head of a file is not always like the rest of it: a column of
// integers for ten thousand rows may hold decimals or text later. DuckDB's
// sniffer samples chunks from across a file for that; so does Settle, for
// the files whose samples give the types (the first SampleFiles): besides
// the head (SampleRecords records), spreadChunks stretches of
// spreadChunkBytes spread evenly over the rest of a plain CSV or JSON Lines
// file, the last ending at its end, each read from its first line start to
// the end of the record that crosses its end. A file whose rest is shorter
// than those stretches together is read on to its end instead. So at most
// spreadChunks*spreadChunkBytes (2 MiB) more of a file is read, in as many
// ranged reads. A column whose values there do not fit the head's type is
// widened, as the head's own values would widen it (integers to floats, to
// text). Compressed files (which cannot be read from the middle) and files
// whose head holds a quoted line end (whose records cannot be found from an
// arbitrary byte) are sampled at the head only; a .json file, read whole at
// Inspect, is sampled in the same stretches there (sampleJSON).
const (
	spreadChunks     = 8
	spreadChunkBytes = 256 << 10
)

// spreadAll samples the files that give the types across their bytes.
func (f *Format) spreadAll(ctx context.Context, frags []*formats.Fragment) error {
	if f.kind == JSON || f.opts.Schema != nil {
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, fr := range frags[:min(len(frags), f.opts.SampleFiles)] {
		g.Go(func() error {
			if err := f.spread(gctx, fr, fr.Meta.(*meta)); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("%s: sampling across the file: %w", fr.URL, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// spreadStarts returns where the stretches sampled past the head start and
// how long each is: none where the head read the whole file.
func spreadStarts(from, size int64) ([]int64, int64) {
	rest := size - from
	if rest <= 0 {
		return nil, 0
	}
	if rest <= spreadChunks*spreadChunkBytes {
		return []int64{from}, rest
	}
	starts := make([]int64, spreadChunks)
	for k := range starts {
		starts[k] = from + (rest-spreadChunkBytes)*int64(k+1)/spreadChunks
	}
	return starts, spreadChunkBytes
}

// spread reads the stretches of one file past its head and widens its
// sampled types by their records.
func (f *Format) spread(ctx context.Context, fr *formats.Fragment, m *meta) error {
	if m.comp != plain || m.whole != "" || (f.kind != JSONLines && len(m.names) == 0) {
		return nil
	}
	starts, n := spreadStarts(m.sampledTo, fr.Size)
	ra := fr.Source.ReaderAt(ctx)
	nulls := f.nulls()
	isNull := func(v []byte, quoted bool) bool { return isNullValue(v, quoted, nulls) }
	changed := false
	for _, at := range starts {
		// From the byte before, so that a line starting at the stretch's
		// first byte is seen to start there.
		lo := max(at-1, m.sampledTo)
		buf := make([]byte, at+n-lo)
		if k, err := ra.ReadAt(buf, lo); err != nil && (err != io.EOF || k < len(buf)) {
			return fmt.Errorf("read bytes [%d, %d): %w", lo, at+n, err)
		}
		x := 0
		if lo < at {
			x = lineStart(buf, 1, true)
		}
		src := &source{buf: buf, base: lo, r: io.NewSectionReader(ra, at+n, fr.Size-at-n), step: 64 << 10}
		t := &tokenizer{src: src, d: m.d, pos: x}
		guesses, seen := slices.Clone(m.raw), slices.Clone(m.seen)
		var jt *jtype
		clean := true
		for clean {
			ok, err := t.next()
			if err != nil || !ok || t.start >= at+n {
				clean = err == nil
				break
			}
			if f.kind == JSONLines {
				if rec, err := f.inferSampled(t.fields[0]); err == nil {
					if jt == nil {
						jt = rec
					} else {
						jt.merge(rec)
					}
				}
				continue
			}
			// A record cut otherwise than the header, or holding a quoted
			// line end, says the stretch did not start on a record: it
			// has no say.
			short := len(t.fields) < len(m.names) && f.opts.NullPadding
			if t.multiline || (len(t.fields) != len(m.names) && !short) {
				clean = false
				break
			}
			guesses, seen = observeRecord(guesses, seen, t.fields, t.quoted, isNull)
		}
		if !clean {
			continue
		}
		if f.kind == JSONLines {
			if jt != nil && m.jsonType != nil {
				m.jsonType.merge(jt)
				m.names = m.jsonType.keys() // keys first seen past the head too
			}
			continue
		}
		m.raw, m.seen, changed = guesses, seen, true
	}
	if changed {
		m.settleTypes()
		f.recheckHeader(fr, m)
	}
	return nil
}
