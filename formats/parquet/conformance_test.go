package parquet_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/formatstest"
	"github.com/sluicedata/sluice/formats/parquet"
)

// writeConformance writes rec with arrow-go's writer in row groups of
// unitRows rows, small pages and a page index, so that a cut read fetches
// by pages.
func writeConformance(w io.Writer, rec arrow.RecordBatch, unitRows int) error {
	props := pq.NewWriterProperties(pq.WithMaxRowGroupLength(int64(unitRows)), pq.WithDataPageSize(256),
		pq.WithBatchSize(32), pq.WithPageIndexEnabled(true), pq.WithCompression(compress.Codecs.Snappy))
	fw, err := pqarrow.NewFileWriter(rec.Schema(), w, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return err
	}
	if err := fw.Write(rec); err != nil {
		fw.Close()
		return err
	}
	return fw.Close()
}

func TestConformance(t *testing.T) {
	formatstest.Run(t, formatstest.Driver{
		Formats: []formats.Format{parquet.Format{}},
		Ext:     ".parquet",
		Write:   writeConformance,
		Damages: []formatstest.Damage{
			// The first column chunk's first page header follows the magic.
			{Name: "a page header overwritten", Apply: func(b []byte) []byte {
				copy(b[4:24], bytes.Repeat([]byte{0xff}, 20))
				return b
			}},
			{Name: "a footer longer than the file", Apply: func(b []byte) []byte {
				binary.LittleEndian.PutUint32(b[len(b)-8:], uint32(len(b)))
				return b
			}},
		},
	})
}
