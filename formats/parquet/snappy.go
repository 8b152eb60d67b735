package parquet

import (
	"github.com/apache/arrow-go/v18/parquet/compress"
)

// emptySnappy is arrow-go's Snappy codec, except that an empty block
// decodes to nothing. A DATA_PAGE_V2 holding only nulls has no values
// section, and some writers (parquet-testing's
// datapage_v2_empty_datapage.snappy.parquet) store that section as zero
// bytes, not as the one-byte Snappy encoding of nothing; arrow-go hands the
// empty block to Snappy, which calls it corrupt ("s2: corrupt input"), where
// DuckDB and parquet-java read the page. Only the empty block is treated
// differently: everything else goes to arrow-go's codec as before.
type emptySnappy struct{ snappyCodec }

// snappyCodec is what arrow-go's Snappy codec implements, all of which the
// override keeps.
type snappyCodec interface {
	compress.Codec
	compress.StreamingCodec
}

func (c emptySnappy) Decode(dst, src []byte) []byte {
	if len(src) == 0 {
		return dst[:0]
	}
	return c.snappyCodec.Decode(dst, src)
}

func (c emptySnappy) DecodeWithError(dst, src []byte) ([]byte, error) {
	if len(src) == 0 {
		return dst[:0], nil
	}
	return compress.Decode(c.snappyCodec, dst, src)
}

// The override is process-wide (arrow-go keeps one codec per compression),
// which is why it changes nothing but the empty block.
func init() {
	c, err := compress.GetCodec(compress.Codecs.Snappy)
	if err != nil {
		return
	}
	if base, ok := c.(snappyCodec); ok {
		if _, done := c.(emptySnappy); !done {
			compress.RegisterCodec(compress.Codecs.Snappy, emptySnappy{base})
		}
	}
}
