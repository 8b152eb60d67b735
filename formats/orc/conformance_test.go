package orc_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/formatstest"
	"github.com/sluicedata/sluice/formats/orc"
	"github.com/sluicedata/sluice/internal/testkit/orcwrite"
)

// writeConformance writes rec in stripes of unitRows rows with a row index
// of 32-row groups, compressed in small blocks, so that a cut read starts
// at a row group.
func writeConformance(w io.Writer, rec arrow.RecordBatch, unitRows int) error {
	ow, err := orcwrite.New(w, rec.Schema(), orcwrite.Options{StripeRows: unitRows, RowIndexStride: 32, Compression: orcwrite.Zlib, BlockSize: 1 << 10})
	if err != nil {
		return err
	}
	if err := ow.Write(rec); err != nil {
		return err
	}
	return ow.Close()
}

func TestConformance(t *testing.T) {
	formatstest.Run(t, formatstest.Driver{
		Formats: []formats.Format{orc.Format{}},
		Ext:     ".orc",
		Write:   writeConformance,
		Damages: []formatstest.Damage{
			// The first stripe follows the magic: its index and data
			// streams and its footer overwritten (a stripe is about a
			// twelfth of the file).
			{Name: "a stripe overwritten", Apply: func(b []byte) []byte {
				copy(b[3:len(b)/8], bytes.Repeat([]byte{0xff}, len(b)/8-3))
				return b
			}},
			// The last byte is the postscript's length.
			{Name: "a postscript longer than the file", Apply: func(b []byte) []byte {
				b[len(b)-1] = 0xff
				return b
			}},
		},
	})
}
