package flatdecode

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec is a column chunk's compression, numbered as parquet.thrift numbers
// CompressionCodec. Only those Decompress knows are taken on; LZO and
// Brotli are left to arrow-go.
type Codec int

// The codecs the decoder reads.
const (
	Uncompressed Codec = 0
	Snappy       Codec = 1
	Gzip         Codec = 2
	// LZ4 is the deprecated LZ4 codec, read as DecodeLZ4 reads it.
	LZ4    Codec = 5
	Zstd   Codec = 6
	LZ4Raw Codec = 7
)

// Known reports whether the decoder reads c.
func (c Codec) Known() bool {
	switch c {
	case Uncompressed, Snappy, Gzip, LZ4, Zstd, LZ4Raw:
		return true
	}
	return false
}

// zstdDecoder decodes zstd blocks for every reader: DecodeAll is safe
// for concurrent use, and a decoder's tables are worth keeping.
var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxPage))
})

// maxPage bounds a page's uncompressed size: a header claiming more is
// left to arrow-go rather than allocated for.
const maxPage = 1 << 30

// decompress decodes src, compressed with c, into dst, which has the
// page's uncompressed size: a page that decodes to any other size is
// corrupt.
func decompress(c Codec, dst, src []byte) error {
	var n int
	switch c {
	case Uncompressed:
		if len(src) != len(dst) {
			return fmt.Errorf("%d bytes where the header says %d", len(src), len(dst))
		}
		copy(dst, src)
		return nil
	case Snappy:
		if len(src) == 0 {
			// An empty values section of a page holding only nulls, which
			// some writers store as no bytes at all.
			n = 0
			break
		}
		size, err := snappy.DecodedLen(src)
		if err != nil {
			return fmt.Errorf("snappy: %w", err)
		}
		if size != len(dst) {
			return fmt.Errorf("snappy block of %d bytes where the header says %d", size, len(dst))
		}
		out, err := snappy.Decode(dst, src)
		if err != nil {
			return fmt.Errorf("snappy: %w", err)
		}
		n = len(out)
	case Zstd:
		d, err := zstdDecoder()
		if err != nil {
			return err
		}
		out, err := d.DecodeAll(src, dst[:0:len(dst)])
		if err != nil {
			return fmt.Errorf("zstd: %w", err)
		}
		if len(out) > 0 && &out[0] != &dst[0] {
			return fmt.Errorf("zstd block larger than the header's %d bytes", len(dst))
		}
		n = len(out)
	case LZ4Raw:
		if len(dst) == 0 {
			n = 0
			break
		}
		m, err := lz4.UncompressBlock(src, dst)
		if err != nil {
			return fmt.Errorf("lz4: %w", err)
		}
		n = m
	case LZ4:
		m, err := DecodeLZ4(dst, src)
		if err != nil {
			return err
		}
		n = m
	case Gzip:
		zr, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		m, err := io.ReadFull(zr, dst)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return fmt.Errorf("gzip: %w", err)
		}
		if m == len(dst) {
			var one [1]byte
			if k, _ := zr.Read(one[:]); k > 0 {
				return fmt.Errorf("gzip stream longer than the header's %d bytes", len(dst))
			}
		}
		n = m
	default:
		return fmt.Errorf("compression codec %d", c)
	}
	if n != len(dst) {
		return fmt.Errorf("decompressed to %d bytes where the header says %d", n, len(dst))
	}
	return nil
}

// DecodeLZ4 decodes src, compressed with Parquet's deprecated LZ4 codec,
// into dst, and returns the bytes written. Writers disagree on what that
// codec is: parquet-mr (through Hadoop's Lz4Codec) and Arrow C++ since 0.17
// frame LZ4 blocks as Hadoop does, older Arrow C++ wrote one bare block. As
// Arrow C++ reads it, src is taken as Hadoop's frames where it is wholly
// that, and as a bare block otherwise.
func DecodeLZ4(dst, src []byte) (int, error) {
	if n, ok := decodeHadoopLZ4(dst, src); ok {
		return n, nil
	}
	n, err := lz4.UncompressBlock(src, dst)
	if err != nil {
		return 0, fmt.Errorf("lz4: neither Hadoop's framing nor an LZ4 block: %w", err)
	}
	return n, nil
}

// hadoopPrefix is the bytes before each of Hadoop's LZ4 frames: the
// frame's decompressed size, then its compressed size, both big-endian
// uint32.
const hadoopPrefix = 8

// LZ4FrameBound is the most bytes AppendLZ4Frame appends for n bytes.
func LZ4FrameBound(n int) int { return hadoopPrefix + lz4.CompressBlockBound(n) }

// AppendLZ4Frame appends src to dst as one of Hadoop's LZ4 frames (see
// DecodeLZ4), which is how Arrow C++ writes a page in the deprecated LZ4
// codec.
func AppendLZ4Frame(dst, src []byte) ([]byte, error) {
	at := len(dst)
	dst = slices.Grow(dst, LZ4FrameBound(len(src)))[:at+LZ4FrameBound(len(src))]
	var c lz4.Compressor
	// With room for the bound, the block holds any input (as literals
	// where it does not compress).
	n, err := c.CompressBlock(src, dst[at+hadoopPrefix:])
	if err != nil {
		return dst[:at], fmt.Errorf("lz4: %w", err)
	}
	binary.BigEndian.PutUint32(dst[at:], uint32(len(src)))
	binary.BigEndian.PutUint32(dst[at+4:], uint32(n))
	return dst[:at+hadoopPrefix+n], nil
}

// decodeHadoopLZ4 decodes src as Hadoop's LZ4 frames into dst, and reports
// whether it was: every frame's block lies in src and decodes to the size
// the frame gives, into the room left in dst, and the frames end where src
// does. A bare block, whose first bytes read as sizes, fails one of these
// (the sizes it would give its block are arbitrary).
func decodeHadoopLZ4(dst, src []byte) (int, bool) {
	n := 0
	for len(src) >= hadoopPrefix {
		raw := uint64(binary.BigEndian.Uint32(src))
		size := uint64(binary.BigEndian.Uint32(src[4:]))
		src = src[hadoopPrefix:]
		if size > uint64(len(src)) || raw > uint64(len(dst)-n) {
			return 0, false
		}
		m, err := lz4.UncompressBlock(src[:size], dst[n:n+int(raw)])
		if err != nil || uint64(m) != raw {
			return 0, false
		}
		src = src[size:]
		n += m
	}
	return n, len(src) == 0
}
