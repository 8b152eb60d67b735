package localcache

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParseHeader: any bytes either parse to a header that encodes back to
// the bytes it was read from, or are refused with errBadHeader; never a
// panic, and never a header whose fields are out of range.
func FuzzParseHeader(f *testing.F) {
	var id [32]byte
	copy(id[:], "identity of a block, thirty-two!")
	for _, n := range []int{0, 1, 4096, pageSize, pageSize + 1, 3*pageSize - 7} {
		f.Add(newHeader(id, int64(n)*3, make([]byte, n), pageSize).appendTo(nil))
	}
	f.Add([]byte("SLCB"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := parseHeader(b)
		if err != nil {
			if !errors.Is(err, errBadHeader) {
				t.Fatalf("error %v does not wrap errBadHeader", err)
			}
			return
		}
		if n > len(b) || n != headerSize(h.length, h.pageSize) || len(h.crcs) != pages(h.length, h.pageSize) {
			t.Fatalf("header of %d bytes from %d: %+v", n, len(b), h)
		}
		if h.length > maxBlockBytes || h.pageSize < minPageSize || h.pageSize > maxPageSize || h.offset < 0 {
			t.Fatalf("fields out of range: %+v", h)
		}
		if again := h.appendTo(nil); !bytes.Equal(again, b[:n]) {
			t.Fatalf("re-encoded header differs from the bytes parsed")
		}
	})
}

// TestHeaderRoundTrip: a header written is read back, and its pages check
// against the bytes it was made from and not against others.
func TestHeaderRoundTrip(t *testing.T) {
	data := content(11, 2*pageSize+100)
	var id [32]byte
	id[3] = 9
	enc := newHeader(id, 1<<40, data, pageSize).appendTo([]byte("prefix"))
	h, n, err := parseHeader(enc[len("prefix"):])
	if err != nil {
		t.Fatal(err)
	}
	if n != len(enc)-len("prefix") || h.id != id || h.offset != 1<<40 || h.length != len(data) || len(h.crcs) != 3 {
		t.Fatalf("parsed %+v (%d bytes)", h, n)
	}
	if err := h.checkPages(0, data); err != nil {
		t.Fatal(err)
	}
	if err := h.checkPages(2, data[2*pageSize:]); err != nil {
		t.Fatal(err)
	}
	data[pageSize+5] ^= 1
	if err := h.checkPages(1, data[pageSize:]); err == nil {
		t.Fatal("a changed byte passed the page checksums")
	}
	for i := range enc[len("prefix"):] {
		bad := bytes.Clone(enc[len("prefix"):])
		bad[i] ^= 0x10
		if _, _, err := parseHeader(bad); err == nil {
			t.Fatalf("a header with byte %d changed parsed", i)
		}
	}
}
