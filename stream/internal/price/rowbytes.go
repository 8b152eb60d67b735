package price

import (
	"errors"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/formats"
)

// RowBytes estimates the decoded bytes of a row of the selected columns,
// from what planning learned of the files: the units' Decoded where the
// driver tells it, else the schema's fixed-width columns exactly and the
// unit's stored bytes for the rest, whichever is more (a text file's
// stored bytes are about its strings; a compressed file's are less than
// its decoded ones). Units of unknown row counts are left out; a dataset
// without rows has the fixed-width columns' bytes. It is a pure
// function of the footers, so every rank, and every restart of a job, gets
// the same figure from the same files.
func RowBytes(data *formats.Scan) (float64, error) {
	fixed := fixedRowBytes(data.Schema)
	var bytes, rows float64
	unknown := false
	for _, f := range data.Fragments {
		for _, u := range f.Units {
			unknown = unknown || u.Rows < 0
			if u.Rows <= 0 {
				continue
			}
			d := u.Decoded
			if d <= 0 {
				d = max(int64(fixed*float64(u.Rows)), u.Bytes)
			}
			bytes += float64(d)
			rows += float64(u.Rows)
		}
	}
	switch {
	case rows == 0 && unknown:
		return 0, ErrNoRowBytes
	case rows == 0:
		// No rows at all: any window is the same empty order.
		return max(fixed, 1), nil
	}
	return max(bytes/rows, 1), nil
}

// ErrNoRowBytes is returned by RowBytes when a window cannot be sized in bytes: no unit's rows
// are known before reading.
var ErrNoRowBytes = errors.New("no row group's row count is known before reading (a filter, or CSV and JSON files without text.Options.Count), so the bytes of a row cannot be estimated")

// fixedRowBytes is the bytes a row's fixed-width columns take decoded.
func fixedRowBytes(s *arrow.Schema) float64 {
	var n float64
	for _, f := range s.Fields() {
		if fw, ok := f.Type.(arrow.FixedWidthDataType); ok && f.Type.ID() != arrow.DICTIONARY {
			n += float64(fw.BitWidth()) / 8
		}
	}
	return n
}
