package orc

import (
	"errors"
	"fmt"
	"math/bits"
)

// errShort is returned when a stream ends before the values asked of it.
var errShort = errors.New("stream ends early")

// byteRLE decodes ORC's byte run-length encoding: a control byte below 128
// is a run of (c+3) copies of the next byte, else (256-c) literal bytes.
type byteRLE struct {
	b   []byte
	pos int
	// run state: left values, and whether they repeat b[lit].
	left   int
	repeat bool
	val    byte
}

func (r *byteRLE) reset(b []byte) { *r = byteRLE{b: b} }

func (r *byteRLE) next(dst []byte) error {
	for i := 0; i < len(dst); {
		if r.left == 0 {
			if r.pos >= len(r.b) {
				return errShort
			}
			c := r.b[r.pos]
			r.pos++
			if c < 128 {
				if r.pos >= len(r.b) {
					return errShort
				}
				r.left, r.repeat, r.val = int(c)+3, true, r.b[r.pos]
				r.pos++
			} else {
				r.left, r.repeat = 256-int(c), false
				if r.pos+r.left > len(r.b) {
					return errShort
				}
			}
		}
		n := min(r.left, len(dst)-i)
		if r.repeat {
			for j := range n {
				dst[i+j] = r.val
			}
		} else {
			copy(dst[i:i+n], r.b[r.pos:])
			r.pos += n
		}
		r.left -= n
		i += n
	}
	return nil
}

// skip discards n values.
func (r *byteRLE) skip(n int) error {
	var buf [256]byte
	return discard(r.next, buf[:], n)
}

// discard skips n values of a decoder that cannot skip without decoding
// them, decoding len(buf) at a time into buf.
func discard[T any](next func([]T) error, buf []T, n int) error {
	for n > 0 {
		k := min(n, len(buf))
		if err := next(buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// boolRLE decodes bits (most significant first) packed into bytes that
// are byte-RLE encoded.
type boolRLE struct {
	bytes byteRLE
	cur   byte
	left  int // bits of cur not yet used
}

func (r *boolRLE) reset(b []byte) { *r = boolRLE{}; r.bytes.reset(b) }

func (r *boolRLE) next(dst []bool) error {
	for i := range dst {
		if r.left == 0 {
			var one [1]byte
			if err := r.bytes.next(one[:]); err != nil {
				return err
			}
			r.cur, r.left = one[0], 8
		}
		r.left--
		dst[i] = r.cur>>r.left&1 == 1
	}
	return nil
}

func (r *boolRLE) skip(n int) error {
	if n <= r.left {
		r.left -= n
		return nil
	}
	n -= r.left
	r.left = 0
	if err := r.bytes.skip(n / 8); err != nil {
		return err
	}
	if n%8 != 0 {
		var one [1]byte
		if err := r.bytes.next(one[:]); err != nil {
			return err
		}
		r.cur, r.left = one[0], 8-n%8
	}
	return nil
}

// intReader is an integer run-length decoder, version 1 or 2.
type intReader interface {
	reset(b []byte)
	next(dst []int64) error
	skip(n int) error
}

func newIntReader(v2, signed bool) intReader {
	if v2 {
		return &intRLEv2{signed: signed}
	}
	return &intRLEv1{signed: signed}
}

func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

func readUvarint(b []byte, pos *int) (uint64, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if *pos >= len(b) {
			return 0, errShort
		}
		c := b[*pos]
		*pos++
		if shift == 63 && c > 1 {
			return 0, errors.New("varint overflows 64 bits")
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, nil
		}
		if shift >= 63 {
			return 0, errors.New("varint overflows 64 bits")
		}
	}
}

// intRLEv1: a control byte below 128 starts a run of c+3 values from a
// base varint with a signed byte delta; else 256-c literal varints.
type intRLEv1 struct {
	signed bool
	b      []byte
	pos    int
	left   int
	run    bool
	val    int64
	delta  int64
}

func (r *intRLEv1) reset(b []byte) { *r = intRLEv1{signed: r.signed, b: b} }

func (r *intRLEv1) varint() (int64, error) {
	u, err := readUvarint(r.b, &r.pos)
	if r.signed {
		return unzigzag(u), err
	}
	return int64(u), err
}

func (r *intRLEv1) next(dst []int64) error {
	for i := 0; i < len(dst); {
		if r.left == 0 {
			if r.pos >= len(r.b) {
				return errShort
			}
			c := r.b[r.pos]
			r.pos++
			if c < 128 {
				if r.pos >= len(r.b) {
					return errShort
				}
				r.left, r.run, r.delta = int(c)+3, true, int64(int8(r.b[r.pos]))
				r.pos++
				v, err := r.varint()
				if err != nil {
					return err
				}
				r.val = v
			} else {
				r.left, r.run = 256-int(c), false
			}
		}
		n := min(r.left, len(dst)-i)
		if r.run {
			for j := range n {
				dst[i+j] = r.val
				r.val += r.delta
			}
		} else {
			for j := range n {
				v, err := r.varint()
				if err != nil {
					return err
				}
				dst[i+j] = v
			}
		}
		r.left -= n
		i += n
	}
	return nil
}

func (r *intRLEv1) skip(n int) error { return skipInts(r, n) }

func skipInts(r intReader, n int) error {
	var buf [512]int64
	return discard(r.next, buf[:], n)
}

// intRLEv2 decodes runs of up to 512 values, each in one of four
// encodings: short repeat, direct, patched base and delta.
type intRLEv2 struct {
	signed bool
	b      []byte
	pos    int
	buf    [512]int64
	u      [512]uint64 // a run's values as stored, before they are decoded
	have   int         // values in buf
	at     int         // next value of buf
	patch  []uint64
}

func (r *intRLEv2) reset(b []byte) {
	*r = intRLEv2{signed: r.signed, b: b, patch: r.patch}
}

func (r *intRLEv2) next(dst []int64) error {
	for i := 0; i < len(dst); {
		if r.at == r.have {
			if err := r.run(); err != nil {
				return err
			}
		}
		n := copy(dst[i:], r.buf[r.at:r.have])
		r.at += n
		i += n
	}
	return nil
}

func (r *intRLEv2) skip(n int) error {
	for n > 0 {
		if r.at == r.have {
			if err := r.run(); err != nil {
				return err
			}
		}
		k := min(n, r.have-r.at)
		r.at += k
		n -= k
	}
	return nil
}

// widths maps a 5-bit width code to a bit width.
var widths = [32]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 26, 28, 30, 32, 40, 48, 56, 64}

// closestFixed rounds a bit width up to one the encodings can pack.
func closestFixed(n int) int {
	switch {
	case n == 0:
		return 1
	case n <= 24:
		return n
	case n <= 26:
		return 26
	case n <= 28:
		return 28
	case n <= 30:
		return 30
	case n <= 32:
		return 32
	case n <= 40:
		return 40
	case n <= 48:
		return 48
	case n <= 56:
		return 56
	}
	return 64
}

func (r *intRLEv2) byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, errShort
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

// bigEndian reads an n-byte big-endian unsigned value.
func (r *intRLEv2) bigEndian(n int) (uint64, error) {
	if r.pos+n > len(r.b) {
		return 0, errShort
	}
	var v uint64
	for _, c := range r.b[r.pos : r.pos+n] {
		v = v<<8 | uint64(c)
	}
	r.pos += n
	return v, nil
}

// unpack reads n values of w bits each, packed big-endian from the next
// byte, into dst.
func (r *intRLEv2) unpack(dst []uint64, w int) error {
	total := len(dst) * w
	nbytes := (total + 7) / 8
	if r.pos+nbytes > len(r.b) {
		return errShort
	}
	src := r.b[r.pos : r.pos+nbytes]
	r.pos += nbytes
	switch w {
	case 8:
		for i := range dst {
			dst[i] = uint64(src[i])
		}
		return nil
	case 16:
		for i := range dst {
			dst[i] = uint64(src[2*i])<<8 | uint64(src[2*i+1])
		}
		return nil
	case 32:
		for i := range dst {
			s := src[4*i:]
			dst[i] = uint64(s[0])<<24 | uint64(s[1])<<16 | uint64(s[2])<<8 | uint64(s[3])
		}
		return nil
	}
	if w <= 56 {
		// The bits not yet used are the low nacc of acc: at most w+7.
		var acc uint64
		nacc, at := 0, 0
		mask := uint64(1)<<w - 1
		for i := range dst {
			for nacc < w {
				acc = acc<<8 | uint64(src[at])
				at++
				nacc += 8
			}
			nacc -= w
			dst[i] = acc >> nacc & mask
		}
		return nil
	}
	var acc uint64 // bits not yet used, right-aligned
	nacc := 0
	at := 0
	for i := range dst {
		var v uint64
		need := w
		for need > 0 {
			if nacc == 0 {
				acc, nacc = uint64(src[at]), 8
				at++
			}
			take := min(need, nacc)
			v = v<<take | (acc>>(nacc-take))&(1<<take-1)
			nacc -= take
			need -= take
		}
		dst[i] = v
	}
	return nil
}

func (r *intRLEv2) decode(u uint64) int64 {
	if r.signed {
		return unzigzag(u)
	}
	return int64(u)
}

func (r *intRLEv2) run() error {
	h, err := r.byte()
	if err != nil {
		return err
	}
	r.at = 0
	u := &r.u
	switch h >> 6 {
	case 0: // short repeat
		w := int(h>>3&7) + 1
		n := int(h&7) + 3
		v, err := r.bigEndian(w)
		if err != nil {
			return err
		}
		x := r.decode(v)
		for i := range n {
			r.buf[i] = x
		}
		r.have = n
	case 1: // direct
		h2, err := r.byte()
		if err != nil {
			return err
		}
		w := widths[h>>1&0x1f]
		n := (int(h&1)<<8 | int(h2)) + 1
		if err := r.unpack(u[:n], w); err != nil {
			return err
		}
		for i := range n {
			r.buf[i] = r.decode(u[i])
		}
		r.have = n
	case 2: // patched base
		hb, err := r.bigEndian(3)
		if err != nil {
			return err
		}
		w := widths[h>>1&0x1f]
		n := (int(h&1)<<8 | int(hb>>16)) + 1
		bw := int(hb>>13&7) + 1
		pw := widths[hb>>8&0x1f]
		pgw := int(hb>>5&7) + 1
		pll := int(hb & 0x1f)
		bv, err := r.bigEndian(bw)
		if err != nil {
			return err
		}
		// The base is sign-and-magnitude in its bytes.
		sign := uint64(1) << (bw*8 - 1)
		base := int64(bv &^ sign)
		if bv&sign != 0 {
			base = -base
		}
		if err := r.unpack(u[:n], w); err != nil {
			return err
		}
		if pgw+pw > 64 {
			return fmt.Errorf("patched base run: patch gap and patch widths %d+%d exceed 64 bits", pgw, pw)
		}
		if cap(r.patch) < pll {
			r.patch = make([]uint64, pll, 32)
		}
		patches := r.patch[:pll]
		if err := r.unpack(patches, closestFixed(pgw+pw)); err != nil {
			return err
		}
		at := 0
		for _, p := range patches {
			at += int(p >> pw)
			if at >= n {
				return fmt.Errorf("patched base run: patch at value %d of %d", at, n)
			}
			if patch := p & (1<<pw - 1); patch != 0 {
				if w+bits.Len64(patch) > 64 {
					return fmt.Errorf("patched base run: patch overflows 64 bits")
				}
				u[at] |= patch << w
			}
		}
		for i := range n {
			r.buf[i] = base + int64(u[i])
		}
		r.have = n
	case 3: // delta
		h2, err := r.byte()
		if err != nil {
			return err
		}
		w := 0
		if c := h >> 1 & 0x1f; c != 0 {
			w = widths[c]
		}
		n := (int(h&1)<<8 | int(h2)) + 1
		bu, err := readUvarint(r.b, &r.pos)
		if err != nil {
			return err
		}
		base := r.decode(bu)
		du, err := readUvarint(r.b, &r.pos)
		if err != nil {
			return err
		}
		delta := unzigzag(du)
		r.buf[0] = base
		if n > 1 {
			r.buf[1] = base + delta
		}
		if w == 0 {
			for i := 2; i < n; i++ {
				r.buf[i] = r.buf[i-1] + delta
			}
		} else if n > 2 {
			if err := r.unpack(u[:n-2], w); err != nil {
				return err
			}
			for i := 2; i < n; i++ {
				if delta < 0 {
					r.buf[i] = r.buf[i-1] - int64(u[i-2])
				} else {
					r.buf[i] = r.buf[i-1] + int64(u[i-2])
				}
			}
		}
		r.have = n
	}
	return nil
}
