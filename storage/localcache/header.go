package localcache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// A block file is a header and the block's bytes. The header says which
// block of which object version the file holds (the hash of its identity,
// so a file renamed, copied or of another version is not taken for it),
// and carries a CRC-32C of every page of the bytes and one of itself, so
// that a read checks the pages it uses without reading the rest.
//
//	offset  size      field
//	0       4         magic "SLCB"
//	4       2         format version (1)
//	6       2         zero
//	8       32        identity hash (SHA-256)
//	40      8         offset of the block in the object
//	48      4         length of the block's bytes
//	52      4         page size: a power of two, 4 KiB to 16 MiB
//	56      4 × n     CRC-32C of each page, n = ceil(length / page size)
//	56+4n   4         CRC-32C of the header's bytes before it
//
// Integers are little-endian.

const (
	headerMagic   = "SLCB"
	headerVersion = 1
	fixedHeader   = 56
	minPageSize   = 4 << 10
	maxPageSize   = 16 << 20
	// maxBlockBytes bounds a block, so that a header's page count is
	// bounded before it is trusted.
	maxBlockBytes = 256 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errBadHeader is wrapped by every reason a header is refused.
var errBadHeader = errors.New("not a valid cache block header")

// header is a block file's header.
type header struct {
	id       [32]byte
	offset   int64
	length   int
	pageSize int
	crcs     []uint32 // one per page
}

// headerSize is the encoded size of the header of a block of length bytes
// in pages of pageSize.
func headerSize(length, pageSize int) int {
	return fixedHeader + 4*pages(length, pageSize) + 4
}

func pages(length, pageSize int) int { return (length + pageSize - 1) / pageSize }

// newHeader is the header of block data, at offset in its object.
func newHeader(id [32]byte, offset int64, data []byte, pageSize int) header {
	h := header{id: id, offset: offset, length: len(data), pageSize: pageSize}
	h.crcs = make([]uint32, pages(len(data), pageSize))
	for i := range h.crcs {
		h.crcs[i] = crc32.Checksum(data[i*pageSize:min((i+1)*pageSize, len(data))], castagnoli)
	}
	return h
}

// appendTo appends the encoded header to b.
func (h header) appendTo(b []byte) []byte {
	start := len(b)
	b = append(b, headerMagic...)
	b = binary.LittleEndian.AppendUint16(b, headerVersion)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = append(b, h.id[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(h.offset))
	b = binary.LittleEndian.AppendUint32(b, uint32(h.length))
	b = binary.LittleEndian.AppendUint32(b, uint32(h.pageSize))
	for _, c := range h.crcs {
		b = binary.LittleEndian.AppendUint32(b, c)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// parseHeader decodes the header at the start of b, which holds at least
// the whole header, and returns it with its encoded size. It trusts
// nothing: any field out of range, or a checksum that does not match, is
// an error wrapping errBadHeader.
func parseHeader(b []byte) (header, int, error) {
	var h header
	if len(b) < fixedHeader+4 {
		return h, 0, fmt.Errorf("%w: %d bytes, fewer than a header's %d", errBadHeader, len(b), fixedHeader+4)
	}
	if string(b[:4]) != headerMagic {
		return h, 0, fmt.Errorf("%w: magic %q", errBadHeader, b[:4])
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != headerVersion {
		return h, 0, fmt.Errorf("%w: format version %d, not %d", errBadHeader, v, headerVersion)
	}
	if r := binary.LittleEndian.Uint16(b[6:]); r != 0 {
		return h, 0, fmt.Errorf("%w: reserved field %d", errBadHeader, r)
	}
	copy(h.id[:], b[8:40])
	off := binary.LittleEndian.Uint64(b[40:])
	length := binary.LittleEndian.Uint32(b[48:])
	pageSize := binary.LittleEndian.Uint32(b[52:])
	switch {
	case off > 1<<62:
		return h, 0, fmt.Errorf("%w: offset %d", errBadHeader, off)
	case length > maxBlockBytes:
		return h, 0, fmt.Errorf("%w: block of %d bytes, more than %d", errBadHeader, length, maxBlockBytes)
	case pageSize < minPageSize || pageSize > maxPageSize || pageSize&(pageSize-1) != 0:
		return h, 0, fmt.Errorf("%w: page size %d", errBadHeader, pageSize)
	}
	h.offset, h.length, h.pageSize = int64(off), int(length), int(pageSize)
	n := headerSize(h.length, h.pageSize)
	if len(b) < n {
		return h, 0, fmt.Errorf("%w: %d bytes, fewer than its %d", errBadHeader, len(b), n)
	}
	if want, got := crc32.Checksum(b[:n-4], castagnoli), binary.LittleEndian.Uint32(b[n-4:]); want != got {
		return h, 0, fmt.Errorf("%w: header checksum %08x, computed %08x", errBadHeader, got, want)
	}
	h.crcs = make([]uint32, pages(h.length, h.pageSize))
	for i := range h.crcs {
		h.crcs[i] = binary.LittleEndian.Uint32(b[fixedHeader+4*i:])
	}
	return h, n, nil
}

// checkPages verifies data, the block's pages first to first+len(pages)-1
// (the last may be the block's short last page).
func (h header) checkPages(first int, data []byte) error {
	for i := 0; len(data) > 0; i++ {
		p := data[:min(h.pageSize, len(data))]
		if got := crc32.Checksum(p, castagnoli); first+i >= len(h.crcs) || got != h.crcs[first+i] {
			return fmt.Errorf("page %d of the block: checksum mismatch", first+i)
		}
		data = data[len(p):]
	}
	return nil
}
