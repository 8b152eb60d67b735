package flatdecode

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/bitutil"

	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
)

var errRunPastEnd = errors.New("values run past the end of the page")

// bits reads a value of w bits (w <= 64) at bit offset bit of data, bits
// counted from the least significant of each byte, as Parquet packs them.
// ok is false where the value does not lie inside data.
func bits(data []byte, bit int, w uint) (v uint64, ok bool) {
	if w == 0 {
		return 0, true
	}
	end := bit + int(w)
	if bit < 0 || end > len(data)*8 {
		return 0, false
	}
	i, shift := bit>>3, uint(bit&7)
	if i+8 <= len(data) {
		v = binary.LittleEndian.Uint64(data[i:]) >> shift
		if shift+w > 64 {
			v |= uint64(data[i+8]) << (64 - shift)
		}
	} else {
		var b [16]byte
		copy(b[:], data[i:])
		v = binary.LittleEndian.Uint64(b[:]) >> shift
		if shift+w > 64 {
			v |= uint64(b[8]) << (64 - shift)
		}
	}
	if w < 64 {
		v &= 1<<w - 1
	}
	return v, true
}

// hybrid reads Parquet's RLE / bit-packed hybrid encoding of values of
// width bits: dictionary indices and RLE booleans.
type hybrid struct {
	data  []byte
	pos   int // next run header
	width uint

	rleLeft int    // values left of the current RLE run
	rleVal  uint32 // its value
	bpLeft  int    // values left of the current bit-packed run
	bpBit   int    // bit offset in data of its next value
}

func newHybrid(data []byte, width uint) *hybrid {
	return &hybrid{data: data, width: width}
}

// run starts the next run.
func (h *hybrid) run() error {
	hdr, next, err := thrift.Uvarint(h.data, h.pos)
	if err != nil {
		return errRunPastEnd
	}
	h.pos = next
	if hdr&1 == 1 {
		groups := hdr >> 1
		// Of width 0 (a dictionary of one value) a run takes no bytes.
		if groups > 1<<28 || (h.width > 0 && groups > uint64(len(h.data))) {
			return fmt.Errorf("a bit-packed run of %d groups", groups)
		}
		nbytes := int(groups) * int(h.width)
		// Writers may cut the last run's padding: take what is there.
		avail := min(nbytes, len(h.data)-h.pos)
		h.bpLeft = int(groups) * 8
		if h.width > 0 {
			h.bpLeft = min(h.bpLeft, avail*8/int(h.width))
		}
		if h.bpLeft == 0 && groups > 0 {
			return errRunPastEnd
		}
		h.bpBit = h.pos * 8
		h.pos += avail
		return nil
	}
	count := hdr >> 1
	if count > 1<<31 {
		return fmt.Errorf("an RLE run of %d values", count)
	}
	nb := int(h.width+7) / 8
	if h.pos+nb > len(h.data) {
		return errRunPastEnd
	}
	var v uint32
	for i := range nb {
		v |= uint32(h.data[h.pos+i]) << (8 * i)
	}
	h.pos += nb
	if h.width < 32 && v>>h.width != 0 {
		return fmt.Errorf("an RLE run value %d wider than %d bits", v, h.width)
	}
	h.rleVal, h.rleLeft = v, int(count)
	return nil
}

// next fills dst with the next len(dst) values.
func (h *hybrid) next(dst []uint32) error {
	for i := 0; i < len(dst); {
		switch {
		case h.rleLeft > 0:
			k := min(h.rleLeft, len(dst)-i)
			v := h.rleVal
			for j := range dst[i : i+k] {
				dst[i+j] = v
			}
			h.rleLeft -= k
			i += k
		case h.bpLeft > 0:
			k := min(h.bpLeft, len(dst)-i)
			unpack(dst[i:i+k], h.data, h.bpBit, h.width)
			h.bpBit += k * int(h.width)
			h.bpLeft -= k
			i += k
		default:
			if err := h.run(); err != nil {
				return err
			}
		}
	}
	return nil
}

// counts takes the next n values and reports whether they count up from
// from: from, from+1, and so on. It stops at the first that does not,
// leaving the decoder partway (its caller restores a copy it kept). It
// checks each value where unpacking it, as next does, would write it: a
// batch whose values are a stretch of the dictionary then costs one pass
// over its indices, not a pass to unpack them and one to look at them.
func (h *hybrid) counts(n int, from uint32) (bool, error) {
	for n > 0 {
		switch {
		case h.rleLeft > 0:
			// A run repeats its value, so a second one taken from it fails
			// here.
			if h.rleVal != from {
				return false, nil
			}
			h.rleLeft--
			n--
			from++
		case h.bpLeft > 0:
			k := min(h.bpLeft, n)
			if !countsPacked(h.data, h.bpBit, h.width, k, from) {
				return false, nil
			}
			h.bpBit += k * int(h.width)
			h.bpLeft -= k
			n -= k
			from += uint32(k)
		default:
			if err := h.run(); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

// countsPacked reports whether the n values of w bits packed from bit
// offset bit of data (all inside it, as for unpack) are from, from+1, and
// so on, read as unpack reads them.
func countsPacked(data []byte, bit int, w uint, n int, from uint32) bool {
	mask := uint64(1)<<w - 1
	j := 0
	if fast := (len(data)-8)*8 - bit; fast >= 0 {
		m := min(n, fast/max(int(w), 1)+1)
		for ; j < m; j++ {
			at := bit >> 3
			v := binary.LittleEndian.Uint64(data[at : at+8])
			if uint32(v>>uint(bit&7)&mask) != from+uint32(j) {
				return false
			}
			bit += int(w)
		}
	}
	for ; j < n; j++ {
		v, _ := bits(data, bit, w) // inside: the caller checked
		if uint32(v) != from+uint32(j) {
			return false
		}
		bit += int(w)
	}
	return true
}

// unpack reads len(dst) values of w bits (w <= 32) packed from bit offset
// bit of data, all of which lie inside it. Most values are read with one
// 8-byte load, a shift and a mask: a value of at most 32 bits starting at
// any of a byte's 8 bits ends within the 8 bytes from that byte. Those
// within 8 bytes of the end of data are read by bits.
func unpack(dst []uint32, data []byte, bit int, w uint) {
	if w == 0 {
		clear(dst)
		return
	}
	mask := uint64(1)<<w - 1
	j := 0
	if fast := (len(data)-8)*8 - bit; fast >= 0 {
		// Values starting before byte len(data)-8 can be loaded whole.
		n := min(len(dst), fast/int(w)+1)
		for ; j < n; j++ {
			at := bit >> 3
			v := binary.LittleEndian.Uint64(data[at : at+8])
			dst[j] = uint32(v >> uint(bit&7) & mask)
			bit += int(w)
		}
	}
	for ; j < len(dst); j++ {
		v, _ := bits(data, bit, w) // inside: the caller checked
		dst[j] = uint32(v)
		bit += int(w)
	}
}

// levelsBitmap decodes n definition levels of a column whose maximum level
// is 1 (RLE / bit-packed hybrid of width 1) straight into validity bits:
// an RLE run sets or clears its bits at once and a bit-packed run is copied,
// its bits being validity bits already. It returns how many are set.
func levelsBitmap(data []byte, n int, dst []byte) (int, error) {
	h := hybrid{data: data, width: 1}
	for at := 0; at < n; {
		if h.rleLeft == 0 && h.bpLeft == 0 {
			if err := h.run(); err != nil {
				return 0, fmt.Errorf("definition levels: %w", err)
			}
		}
		if h.rleLeft > 0 {
			k := min(h.rleLeft, n-at)
			bitutil.SetBitsTo(dst, int64(at), int64(k), h.rleVal == 1)
			h.rleLeft -= k
			at += k
			continue
		}
		k := min(h.bpLeft, n-at)
		bitutil.CopyBitmap(h.data, h.bpBit, k, dst, at)
		h.bpBit += k
		h.bpLeft -= k
		at += k
	}
	return bitutil.CountSetBits(dst, 0, n), nil
}
