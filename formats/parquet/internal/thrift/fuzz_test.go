package thrift

import (
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzPageHeader parses arbitrary bytes as a page header. No input may
// panic or read past its bytes, and the header parse must agree with the
// generic skipping of a struct, which the footer and offset index readers
// use: the same bytes taken, the same bytes refused, a header parsed
// from its own bytes alone the same, and none cut short.
func FuzzPageHeader(f *testing.F) {
	for _, header := range []func() ([]byte, PageHeader){v2Header, v1Header, twiceHeader} {
		b, _ := header()
		f.Add(b)
	}
	f.Add([]byte{1<<4 | List, 0xf0 | Struct, 0xff, 0xff, 0x03})
	f.Add([]byte{1<<4 | Map, 2, True<<4 | Binary, 1, 1, 'a', 2, 0, Stop})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParsePageHeader(b)
		if h.Size < 0 || h.Size > len(b) {
			t.Fatalf("header of %d bytes in %d", h.Size, len(b))
		}
		r := NewReader(b)
		serr := r.Skip(Struct, 0)
		if (err == nil) != (serr == nil) || errors.Is(err, ErrShort) != errors.Is(serr, ErrShort) {
			t.Fatalf("the header parse says %v, skipping the struct %v", err, serr)
		}
		if err != nil {
			return
		}
		if r.Pos() != h.Size {
			t.Fatalf("the header parse took %d bytes, skipping the struct %d", h.Size, r.Pos())
		}
		again, err := ParsePageHeader(b[:h.Size])
		if err != nil || again != h {
			t.Fatalf("the header's own bytes parse to %+v, %v; with what follows to %+v", again, err, h)
		}
		for n := range h.Size {
			if _, err := ParsePageHeader(b[:n]); err == nil {
				t.Fatalf("the header cut to %d of its %d bytes parsed", n, h.Size)
			}
		}
	})
}

// FuzzUvarint reads arbitrary bytes as varints, one after another, as
// the RLE and delta decoders do: never past the bytes, and each as
// encoding/binary reads it where that takes it.
func FuzzUvarint(f *testing.F) {
	f.Add([]byte{0x80, 0x01})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, b []byte) {
		for at := 0; at < len(b); {
			v, next, err := Uvarint(b, at)
			if next < at || next > len(b) {
				t.Fatalf("at %d: read to %d of %d bytes", at, next, len(b))
			}
			want, n := binary.Uvarint(b[at:])
			switch {
			case n > 0 && (err != nil || v != want || next != at+n):
				t.Fatalf("at %d: %d to %d, %v; encoding/binary reads %d to %d", at, v, next, err, want, at+n)
			case n == 0 && len(b)-at < binary.MaxVarintLen64 && !errors.Is(err, ErrShort):
				t.Fatalf("at %d: %v, want ErrShort", at, err)
			case n == 0 && err == nil:
				// Ten bytes that all say more follow: too long here,
				// where encoding/binary would read an eleventh to tell.
				t.Fatalf("at %d: %d to %d from a varint of ten bytes or more", at, v, next)
			}
			if err != nil {
				return
			}
			at = next
		}
	})
}
