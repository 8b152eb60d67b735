// Package thrift reads Thrift's compact protocol as far as the Parquet
// driver needs it, without building values: the footer's checks and
// rewrites, the offset index, and the page headers that the page checks,
// the page walk and the own decoder (flatdecode) read. One reader serves
// them all, so that they agree on what a header holds and on which bytes
// are refused.
//
// Every count it reads is checked against the bytes that remain before
// anything is sized by it: the bytes are untrusted, and a few of them may
// claim gigabytes.
package thrift

import (
	"errors"
	"fmt"
)

// Compact protocol type codes.
const (
	Stop   = 0
	True   = 1
	False  = 2
	Byte   = 3
	I16    = 4
	I32    = 5
	I64    = 6
	Double = 7
	Binary = 8
	List   = 9
	Set    = 10
	Map    = 11
	Struct = 12
	UUID   = 13
)

// MaxDepth is how deep values may nest: the recursion limit of Thrift's
// own decoder, which arrow-go reads footers and page headers with, so that
// nothing it reads is refused here for its depth alone.
const MaxDepth = 64

// ErrShort is the error of bytes that end inside a value: cut short, as
// opposed to wrong.
var ErrShort = errors.New("thrift: the bytes end inside a value")

// Reader reads values of the compact protocol from a byte slice.
type Reader struct {
	b   []byte
	pos int
}

// NewReader returns a Reader at the start of b.
func NewReader(b []byte) Reader { return Reader{b: b} }

// Bytes are the bytes the Reader reads.
func (r *Reader) Bytes() []byte { return r.b }

// Pos is the offset of the next byte to read.
func (r *Reader) Pos() int { return r.pos }

// Remaining is the number of bytes not yet read.
func (r *Reader) Remaining() int { return len(r.b) - r.pos }

// Byte reads one byte.
func (r *Reader) Byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, ErrShort
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

func (r *Reader) advance(n int64) error {
	if n < 0 || n > int64(r.Remaining()) {
		return ErrShort
	}
	r.pos += int(n)
	return nil
}

// Uvarint reads an unsigned LEB128 varint of at most ten bytes, as
// Thrift's integers and Parquet's RLE and delta headers are written.
func (r *Reader) Uvarint() (v uint64, err error) {
	v, r.pos, err = Uvarint(r.b, r.pos)
	return v, err
}

// Varint reads a zigzag-encoded integer (i16, i32 or i64).
func (r *Reader) Varint() (int64, error) {
	v, err := r.Uvarint()
	return Zigzag(v), err
}

// Uvarint decodes the unsigned LEB128 varint at b[pos:] and returns it
// with the position after the bytes it read (on an error too). Bits past
// the 64th are dropped rather than refused, as Thrift's own decoder does;
// a varint longer than ten bytes is an error.
func Uvarint(b []byte, pos int) (v uint64, next int, err error) {
	for shift := 0; shift < 64; shift += 7 {
		if pos < 0 || pos >= len(b) {
			return 0, pos, ErrShort
		}
		c := b[pos]
		pos++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, pos, nil
		}
	}
	return 0, pos, errors.New("thrift: varint longer than 64 bits")
}

// Zigzag decodes a zigzag-encoded integer.
func Zigzag(v uint64) int64 { return int64(v>>1) ^ -int64(v&1) }

// Binary reads a binary or string value, whose length must fit in the
// bytes that remain. The bytes returned are the Reader's.
func (r *Reader) Binary() ([]byte, error) {
	n, err := r.Uvarint()
	if err != nil {
		return nil, err
	}
	if n > uint64(r.Remaining()) {
		return nil, fmt.Errorf("thrift: binary of %d bytes in %d", n, r.Remaining())
	}
	v := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return v, nil
}

// Fields calls field for each field header of a struct until its stop
// byte, with the field's id and type; field must consume the value (Skip
// it, or read it). depth is the struct's nesting, from 0 for the outermost.
func (r *Reader) Fields(depth int, field func(id int16, typ byte) error) error {
	if depth > MaxDepth {
		return fmt.Errorf("thrift: structs nest deeper than %d", MaxDepth)
	}
	var id int16
	for {
		h, err := r.Byte()
		if err != nil {
			return err
		}
		typ := h & 0x0f
		if typ == Stop {
			return nil
		}
		if delta := int16(h >> 4); delta != 0 {
			id += delta
		} else {
			v, err := r.Varint()
			if err != nil {
				return err
			}
			id = int16(v)
		}
		if err := field(id, typ); err != nil {
			return err
		}
	}
}

// ListHeader reads a list or set header. A count in the long form must
// fit in the bytes that remain (every element takes one at least).
func (r *Reader) ListHeader() (n int64, elem byte, err error) {
	h, err := r.Byte()
	if err != nil {
		return 0, 0, err
	}
	n, elem = int64(h>>4), h&0x0f
	if n == 15 {
		v, err := r.Uvarint()
		if err != nil {
			return 0, 0, err
		}
		if v > uint64(r.Remaining()) {
			return 0, 0, fmt.Errorf("thrift: list claims %d elements in %d bytes", v, r.Remaining())
		}
		n = int64(v)
	}
	return n, elem, nil
}

// SkipElems skips n elements of type elem of a list or set.
func (r *Reader) SkipElems(elem byte, n int64, depth int) error {
	for range n {
		if err := r.skipElem(elem, depth); err != nil {
			return err
		}
	}
	return nil
}

// skipElem consumes one element of a list, set or map: unlike a struct
// field's, a container's booleans take a byte each.
func (r *Reader) skipElem(typ byte, depth int) error {
	if typ == True || typ == False {
		return r.advance(1)
	}
	return r.Skip(typ, depth)
}

// Skip consumes one value of type typ, of a struct field, at nesting
// depth.
func (r *Reader) Skip(typ byte, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("thrift: values nest deeper than %d", MaxDepth)
	}
	switch typ {
	case True, False:
		return nil // a struct field's boolean is in its header
	case Byte:
		return r.advance(1)
	case I16, I32, I64:
		_, err := r.Uvarint()
		return err
	case Double:
		return r.advance(8)
	case UUID:
		return r.advance(16)
	case Binary:
		_, err := r.Binary()
		return err
	case List, Set:
		n, elem, err := r.ListHeader()
		if err != nil {
			return err
		}
		return r.SkipElems(elem, n, depth+1)
	case Map:
		n, err := r.Uvarint()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if n > uint64(r.Remaining())/2 {
			return fmt.Errorf("thrift: map claims %d entries in %d bytes", n, r.Remaining())
		}
		kv, err := r.Byte()
		if err != nil {
			return err
		}
		for range n {
			if err := r.skipElem(kv>>4, depth+1); err != nil {
				return err
			}
			if err := r.skipElem(kv&0x0f, depth+1); err != nil {
				return err
			}
		}
		return nil
	case Struct:
		return r.Fields(depth+1, func(_ int16, typ byte) error { return r.Skip(typ, depth+1) })
	}
	return fmt.Errorf("thrift: unknown type %d", typ)
}
