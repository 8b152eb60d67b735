package avro

import (
	"bytes"
	"compress/bzip2"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"

	"github.com/sluicedata/sluice/internal/unzeroed"
)

// magic opens every Avro object container file.
var magic = []byte{'O', 'b', 'j', 1}

// syncSize is the length of the marker that ends the header and each
// block.
const syncSize = 16

// header is what a file's header holds.
type header struct {
	schema []byte
	codec  string
	sync   [syncSize]byte
	// size is the header's length in bytes: the first block starts here.
	size int64
	// raw is the header's bytes.
	raw []byte
}

// errShort is returned by parseHeader when buf ends inside the header.
var errShort = errors.New("the data ends early")

// parseHeader parses the header at the start of buf.
func parseHeader(buf []byte) (*header, error) {
	if len(buf) < len(magic) {
		return nil, errShort
	}
	if !bytes.Equal(buf[:len(magic)], magic) {
		return nil, fmt.Errorf("the file does not start with Avro's magic %q: not an Avro object container file", magic)
	}
	c := &cursor{b: buf, p: len(magic)}
	h := &header{}
	seen := map[string]bool{}
	for {
		n := c.long()
		if c.err != nil {
			return nil, errShort
		}
		if n == 0 {
			break
		}
		if n < 0 {
			n = -n
			c.long() // the block's size in bytes
		}
		if n > int64(len(buf)) {
			return nil, errShort // each entry takes 2 bytes or more: read more, if there is more
		}
		for range n {
			k, v := c.bytes(), c.bytes()
			if c.err != nil {
				if errors.Is(c.err, errNegative) {
					return nil, fmt.Errorf("header metadata: %w", c.err)
				}
				return nil, errShort
			}
			if seen[string(k)] {
				return nil, fmt.Errorf("header metadata key %q given twice", k)
			}
			seen[string(k)] = true
			switch string(k) {
			case "avro.schema":
				h.schema = v
			case "avro.codec":
				h.codec = string(v)
			}
		}
	}
	if len(buf)-c.p < syncSize {
		return nil, errShort
	}
	copy(h.sync[:], buf[c.p:])
	h.size = int64(c.p + syncSize)
	h.raw = append([]byte(nil), buf[:h.size]...)
	if h.schema == nil {
		return nil, errors.New("the header has no avro.schema")
	}
	switch h.codec {
	case "", "null", "deflate", "snappy", "zstandard", "bzip2":
	case "xz":
		return nil, fmt.Errorf("codec %q is not supported (null, deflate, snappy, zstandard and bzip2 are)", h.codec)
	default:
		return nil, fmt.Errorf("unknown codec %q", h.codec)
	}
	return h, nil
}

// block is one block of a file.
type block struct {
	// off is where the block (its object count) starts; data and size
	// are where its stored objects start and their length. The sync
	// marker follows them.
	off, data, size int64
	rows            int64
}

func (b block) end() int64 { return b.data + b.size + syncSize }

// window reads a file through a buffer of its bytes, so that headers of
// blocks near one another cost one request.
type window struct {
	r    io.ReaderAt
	size int64
	buf  []byte
	at   int64
	// reads counts the requests made, for tests.
	reads int
}

// get returns [off, off+n) of the file, or less where the file ends
// first, fetching want bytes from off where the buffer lacks them.
func (w *window) get(off int64, n, want int) ([]byte, error) {
	if off >= w.at && off+int64(n) <= w.at+int64(len(w.buf)) {
		return w.buf[off-w.at : off-w.at+int64(n)], nil
	}
	want = int(min(int64(max(want, n)), w.size-off))
	if want <= 0 {
		return nil, nil
	}
	// The read fills buf or fails: it needs no zeroing first.
	buf := unzeroed.Bytes(want)
	w.reads++
	if n, err := w.r.ReadAt(buf, off); err != nil && !(errors.Is(err, io.EOF) && n == want) {
		return nil, &readError{err}
	}
	w.buf, w.at = buf, off
	return buf[:min(n, want)], nil
}

// readError is a failed read, which says nothing of the file: it is not
// reported as corrupt.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// Reads of block headers: after a block of bigBlock bytes or more, the
// walk fetches only its sync marker and the next block's header (one
// small request a block, the data left unread); after a smaller one, a
// window of smallWindow bytes, which holds the headers of many.
const (
	smallWindow = 4 << 20
	headerRead  = 64
	bigBlock    = 1 << 20
)

// walk reads the header of every block from off, checking each block's
// sync marker, and returns the blocks. minRow is the fewest bytes an
// object takes, and limit the most bytes a block's objects may take (its
// stored size where they are not compressed): a block that claims more
// objects than those bytes hold is refused here.
func walk(ctx context.Context, w *window, off int64, sync [syncSize]byte, minRow int64, limit func(stored int64) int64) ([]block, error) {
	var blocks []block
	want := smallWindow
	for off < w.size {
		if len(blocks)%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		hdr, err := w.get(off, 20, want)
		if err != nil {
			return nil, err
		}
		c := &cursor{b: hdr}
		rows, size := c.long(), c.long()
		i := len(blocks)
		if c.err != nil {
			return nil, fmt.Errorf("block %d at byte %d: its header (object count and size) is cut off by the end of the file at byte %d: truncated", i, off, w.size)
		}
		if rows < 0 || size < 0 {
			return nil, fmt.Errorf("block %d at byte %d: header claims %d objects in %d bytes", i, off, rows, size)
		}
		b := block{off: off, data: off + int64(c.p), size: size, rows: rows}
		if size > w.size || b.end() > w.size {
			return nil, fmt.Errorf("block %d at byte %d: its %d bytes and sync marker run past the end of the file at byte %d: truncated", i, off, size, w.size)
		}
		if minRow > 0 && rows > limit(size)/minRow {
			return nil, fmt.Errorf("block %d at byte %d: claims %d objects in %d bytes (%d once decompressed at most), and each takes at least %d", i, off, rows, size, limit(size), minRow)
		}
		if minRow == 0 && rows > maxZeroWidth {
			return nil, fmt.Errorf("block %d at byte %d: claims %d objects of a type that takes no bytes", i, off, rows)
		}
		want = smallWindow
		if size >= bigBlock {
			want = headerRead
		}
		m, err := w.get(b.end()-syncSize, syncSize, want)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(m, sync[:]) {
			return nil, fmt.Errorf("block %d at byte %d: the sync marker after its %d bytes (at byte %d) is not the header's: corrupt, or a lying block size", i, off, size, b.end()-syncSize)
		}
		blocks = append(blocks, b)
		off = b.end()
	}
	return blocks, nil
}

// maxZeroWidth bounds the objects a block may claim where they take no
// bytes (a schema of null): nothing else would bound the rows a lying
// count makes.
const maxZeroWidth = 1 << 24

// decompress returns a block's objects from its stored bytes, refusing
// more than limit bytes of them; snappy decodes into buf where it has room.
func decompress(codec string, stored []byte, limit int64, buf []byte) ([]byte, error) {
	switch codec {
	case "", "null":
		return stored, nil
	case "deflate":
		return readLimited(flate.NewReader(bytes.NewReader(stored)), limit, codec)
	case "bzip2":
		return readLimited(bzip2.NewReader(bytes.NewReader(stored)), limit, codec)
	case "snappy":
		// The snappy codec follows each block with the CRC-32 of its
		// uncompressed bytes, big-endian.
		if len(stored) < 4 {
			return nil, errors.New("snappy: a block of fewer than 4 bytes has no checksum")
		}
		body, sum := stored[:len(stored)-4], binary.BigEndian.Uint32(stored[len(stored)-4:])
		n, err := snappy.DecodedLen(body)
		if err != nil {
			return nil, fmt.Errorf("snappy: %w", err)
		}
		if int64(n) > limit {
			return nil, fmt.Errorf("snappy: the block decompresses to %d bytes, more than the limit of %d (Format.MaxBlockBytes)", n, limit)
		}
		out, err := snappy.Decode(buf[:cap(buf)], body)
		if err != nil {
			return nil, fmt.Errorf("snappy: %w", err)
		}
		if got := crc32.ChecksumIEEE(out); got != sum {
			return nil, fmt.Errorf("snappy: checksum %08x of the decompressed block, where the file has %08x", got, sum)
		}
		return out, nil
	case "zstandard":
		out, err := zstdDecoder(limit).DecodeAll(stored, nil)
		if err != nil {
			return nil, fmt.Errorf("zstandard: %w", err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown codec %q", codec)
}

func readLimited(r io.Reader, limit int64, codec string) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", codec, err)
	}
	if int64(len(out)) > limit {
		return nil, fmt.Errorf("%s: the block decompresses to more than the limit of %d bytes (Format.MaxBlockBytes)", codec, limit)
	}
	return out, nil
}

// zstd decoders are safe for concurrent DecodeAll and costly to make:
// one per limit, kept.
var zstdDecoders sync.Map

func zstdDecoder(limit int64) *zstd.Decoder {
	if d, ok := zstdDecoders.Load(limit); ok {
		return d.(*zstd.Decoder)
	}
	// DecodeAll starts no goroutines, so the decoder needs no Close.
	d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(uint64(limit)), zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)))
	if err != nil {
		panic(err) // only for invalid options, which these are not
	}
	actual, _ := zstdDecoders.LoadOrStore(limit, d)
	return actual.(*zstd.Decoder)
}
