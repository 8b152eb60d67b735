package parquet

import (
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/sluicedata/sluice/formats/parquet/internal/flatdecode"
)

// lz4Hadoop is the deprecated LZ4 codec for arrow-go, which has none
// ("compression for LZ4 unimplemented") and so refused every file of it,
// as DuckDB does; parquet-mr (through Hadoop's codec) and Arrow C++ wrote
// them before LZ4_RAW replaced it. Its pages are read as Arrow C++ reads
// them (flatdecode.DecodeLZ4): Hadoop's framing where a page is wholly
// that, a bare LZ4 block otherwise. flatdecode reads the flat columns of
// such files itself; this codec serves the columns arrow-go decodes.
//
// Registering it is process-wide, as arrow-go keeps one codec per
// compression: an arrow-go writer in the same process asked for LZ4 then
// writes what Arrow C++ writes for it, one Hadoop frame a page.
type lz4Hadoop struct{}

func (lz4Hadoop) DecodeWithError(dst, src []byte) ([]byte, error) {
	n, err := flatdecode.DecodeLZ4(dst[:cap(dst)], src)
	if err != nil {
		return nil, err
	}
	return dst[:n], nil
}

func (c lz4Hadoop) Decode(dst, src []byte) []byte {
	out, err := c.DecodeWithError(dst, src)
	if err != nil {
		panic(err) // arrow-go's Codec.Decode has no error; compress.Decode calls DecodeWithError
	}
	return out
}

func (lz4Hadoop) Encode(dst, src []byte) []byte {
	out, err := flatdecode.AppendLZ4Frame(dst[:0], src)
	if err != nil {
		panic(err) // arrow-go's Codec.Encode has no error; with room for the bound there is none
	}
	return out
}

func (c lz4Hadoop) EncodeLevel(dst, src []byte, _ int) []byte { return c.Encode(dst, src) }

func (lz4Hadoop) CompressBound(n int64) int64 { return int64(flatdecode.LZ4FrameBound(int(n))) }

func init() {
	if _, err := compress.GetCodec(compress.Codecs.Lz4); err != nil {
		compress.RegisterCodec(compress.Codecs.Lz4, lz4Hadoop{})
	}
}
