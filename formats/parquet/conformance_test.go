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
// unitRows rows and small pages, with a page index or (as pyarrow writes
// files) without, where the driver walks the page headers: either way a
// cut read fetches by pages.
func writeConformance(w io.Writer, rec arrow.RecordBatch, unitRows int, pageIndex bool) error {
	props := pq.NewWriterProperties(pq.WithMaxRowGroupLength(int64(unitRows)), pq.WithDataPageSize(256),
		pq.WithBatchSize(32), pq.WithPageIndexEnabled(pageIndex), pq.WithCompression(compress.Codecs.Snappy))
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
	damages := []formatstest.Damage{
		// The first column chunk's first page header follows the magic.
		{Name: "a page header overwritten", Apply: func(b []byte) []byte {
			copy(b[4:24], bytes.Repeat([]byte{0xff}, 20))
			return b
		}},
		{Name: "a footer longer than the file", Apply: func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[len(b)-8:], uint32(len(b)))
			return b
		}},
	}
	for _, pageIndex := range []bool{true, false} {
		t.Run(map[bool]string{true: "PageIndex", false: "NoPageIndex"}[pageIndex], func(t *testing.T) {
			formatstest.Run(t, formatstest.Driver{
				Formats: []formats.Format{parquet.Format{}},
				Ext:     ".parquet",
				Write: func(w io.Writer, rec arrow.RecordBatch, unitRows int) error {
					return writeConformance(w, rec, unitRows, pageIndex)
				},
				Damages: damages,
			})
		})
	}
}
