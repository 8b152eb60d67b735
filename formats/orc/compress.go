package orc

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	lzo "github.com/anchore/go-lzo"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// defaultBlockSize is the compression block size of files whose postscript
// leaves it out (ORC's default).
const defaultBlockSize = 256 << 10

// maxBlockSize bounds a compression block: the size field has 23 bits.
const maxBlockSize = 1<<23 - 1

// codec undoes one compression kind, chunk by chunk.
type codec struct {
	kind      uint64
	blockSize int
}

var (
	flatePool = sync.Pool{New: func() any { return flate.NewReader(bytes.NewReader(nil)) }}
	zstdPool  = sync.Pool{New: func() any {
		// One decoder per concurrent use, without goroutines of its own.
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxMemory(maxBlockSize+1))
		if err != nil {
			panic(err) // only for invalid options
		}
		return d
	}}
)

// decompress turns a stream's stored bytes into its decoded bytes: a run
// of chunks, each with a 3-byte header giving its length and whether it is
// stored as is. dst is reused.
func (c codec) decompress(dst, src []byte) ([]byte, error) {
	return c.decompressChunks(dst, src, nil)
}

// chunkStart places a compression chunk: at its stored offset in the
// stream's bytes, raw its offset in their decompressed bytes.
type chunkStart struct{ at, raw int }

// decompressChunks is decompress that also lists, where starts is set,
// where each chunk starts in src and in the output.
func (c codec) decompressChunks(dst, src []byte, starts *[]chunkStart) ([]byte, error) {
	if c.kind == compNone {
		return append(dst[:0], src...), nil
	}
	out := dst[:0]
	for at := 0; at < len(src); {
		if starts != nil {
			*starts = append(*starts, chunkStart{at, len(out)})
		}
		if len(src)-at < 3 {
			return nil, fmt.Errorf("compression chunk header at byte %d: %d bytes left", at, len(src)-at)
		}
		h := int(src[at]) | int(src[at+1])<<8 | int(src[at+2])<<16
		n, original := h>>1, h&1 == 1
		at += 3
		if n > len(src)-at {
			return nil, fmt.Errorf("compression chunk at byte %d claims %d bytes, %d are left", at-3, n, len(src)-at)
		}
		chunk := src[at : at+n]
		at += n
		if original {
			out = append(out, chunk...)
			continue
		}
		var err error
		out, err = c.chunk(out, chunk)
		if err != nil {
			return nil, fmt.Errorf("compression chunk at byte %d: %w", at-n-3, err)
		}
	}
	return out, nil
}

// chunk appends the decompressed chunk to out; a chunk may not decode to
// more than the block size.
func (c codec) chunk(out, chunk []byte) ([]byte, error) {
	limit := c.blockSize
	start := len(out)
	out = growTo(out, start+limit)
	dst := out[start : start+limit]
	switch c.kind {
	case compZlib:
		r := flatePool.Get().(io.ReadCloser)
		defer flatePool.Put(r)
		if err := r.(flate.Resetter).Reset(bytes.NewReader(chunk), nil); err != nil {
			return nil, fmt.Errorf("zlib: %w", err)
		}
		n, err := io.ReadFull(r, dst)
		switch {
		case err == io.ErrUnexpectedEOF || err == io.EOF:
		case err != nil:
			return nil, fmt.Errorf("zlib: %w", err)
		default:
			var one [1]byte
			if m, _ := r.Read(one[:]); m > 0 {
				return nil, fmt.Errorf("zlib: decodes to more than the block size %d", limit)
			}
		}
		return out[:start+n], nil
	case compSnappy:
		n, err := snappy.DecodedLen(chunk)
		if err != nil {
			return nil, fmt.Errorf("snappy: %w", err)
		}
		if n > limit {
			return nil, fmt.Errorf("snappy: decodes to %d bytes, more than the block size %d", n, limit)
		}
		got, err := snappy.Decode(dst, chunk)
		if err != nil {
			return nil, fmt.Errorf("snappy: %w", err)
		}
		return out[:start+len(got)], nil
	case compLZ4:
		n, err := lz4.UncompressBlock(chunk, dst)
		if err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		return out[:start+n], nil
	case compZstd:
		d := zstdPool.Get().(*zstd.Decoder)
		defer zstdPool.Put(d)
		got, err := d.DecodeAll(chunk, dst[:0])
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		if len(got) > limit {
			return nil, fmt.Errorf("zstd: decodes to %d bytes, more than the block size %d", len(got), limit)
		}
		if len(got) > 0 && &got[0] != &dst[0] {
			copy(dst, got)
		}
		return out[:start+len(got)], nil
	case compLZO:
		n, err := lzoDecompress(chunk, dst)
		if err != nil {
			return nil, fmt.Errorf("lzo: %w", err)
		}
		return out[:start+n], nil
	}
	return nil, fmt.Errorf("compression kind %d is not known", c.kind)
}

// lzoDecompress guards go-lzo, which indexes its input without checks on
// some malformed blocks.
func lzoDecompress(src, dst []byte) (n int, err error) {
	defer func() {
		if r := recover(); r != nil {
			n, err = 0, fmt.Errorf("malformed block: %v", r)
		}
	}()
	return lzo.Decompress(src, dst)
}

func growTo(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	nb := make([]byte, n, max(n, 2*cap(b)))
	copy(nb, b)
	return nb
}

// decompressPrefix decompresses the whole chunks at the start of src, a
// part of a stream cut at an arbitrary byte: a trailing partial chunk is
// left out.
func (c codec) decompressPrefix(src []byte) ([]byte, error) {
	if c.kind == compNone {
		return src, nil
	}
	return c.decompress(nil, src[:c.wholeChunks(src)])
}

// wholeChunks is the length of the whole chunks at the start of src.
func (c codec) wholeChunks(src []byte) int {
	end := 0
	for end+3 <= len(src) {
		n := (int(src[end]) | int(src[end+1])<<8 | int(src[end+2])<<16) >> 1
		if n > len(src)-end-3 {
			break
		}
		end += 3 + n
	}
	return end
}
