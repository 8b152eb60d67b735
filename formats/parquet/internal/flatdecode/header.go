package flatdecode

import (
	"errors"

	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
)

// Encodings, numbered as in parquet.thrift.
const (
	encPlain             = 0
	encPlainDictionary   = 2
	encRLE               = 3
	encBitPacked         = 4
	encDeltaBinaryPacked = 5
	encDeltaLength       = 6 // DELTA_LENGTH_BYTE_ARRAY
	encDeltaByteArray    = 7
	encRLEDictionary     = 8
	encByteStreamSplit   = 9
)

// parseHeader reads the page header at the start of b. A sub-header given
// twice is refused: which one's counts the writer meant is not the
// decoder's to guess, so such a page is arrow-go's.
func parseHeader(b []byte) (thrift.PageHeader, error) {
	h, err := thrift.ParsePageHeader(b)
	if err == nil && h.Repeated {
		err = errors.New("a sub-header given twice")
	}
	return h, err
}
