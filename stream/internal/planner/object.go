package planner

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluicedata/sluice/formats"
)

// objectMagic opens a plan object of version 2 and later. Version 1 was
// JSON alone, and opens with '{'.
const objectMagic = "sluice plan\n"

// MarshalBinary lays sp out as the plan object: objectMagic; the length of
// the JSON header and the header (sp without units and cache entries);
// every file's units, in the order of sp.Files; and the cache entries.
// The bulk (every row group of every file, and the footers, which are
// binary already) is binary, so that a rank of a thousand reads it in a
// few milliseconds: as JSON, the footers' base64 alone cost tens.
func (sp *Object) MarshalBinary() ([]byte, error) {
	head := *sp
	head.Cache = nil
	hdr, err := json.Marshal(&head)
	if err != nil {
		return nil, err
	}
	out := append([]byte(objectMagic), binary.AppendUvarint(nil, uint64(len(hdr)))...)
	out = append(out, hdr...)
	for _, f := range sp.Files {
		out = binary.AppendUvarint(out, uint64(len(f.Units)))
		for _, u := range f.Units {
			out = binary.AppendVarint(out, u.Rows)
			out = binary.AppendVarint(out, u.Bytes)
			out = binary.AppendVarint(out, u.Offset)
			out = binary.AppendVarint(out, u.Decoded)
			paged := byte(0)
			if u.Paged {
				paged = 1
			}
			out = append(out, paged)
		}
	}
	out = binary.AppendUvarint(out, uint64(len(sp.Cache)))
	for _, e := range sp.Cache {
		out = binary.AppendUvarint(out, uint64(len(e.Key)))
		out = append(out, e.Key...)
		out = binary.AppendUvarint(out, uint64(len(e.Value)))
		out = append(out, e.Value...)
	}
	return out, nil
}

// UnmarshalBinary reads a plan object of any version this build reads,
// checked as a rank checks the one it finds in its Store.
func (sp *Object) UnmarshalBinary(raw []byte) error {
	got, err := decodeSharedPlan(raw)
	if err != nil {
		return err
	}
	*sp = *got
	return nil
}

// objectReader reads the binary part of a plan object, each read checked
// against what is left.
type objectReader struct {
	b   []byte
	err error
}

func (r *objectReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: plan object truncated or malformed at %s", formats.ErrCorrupt, what)
	}
}

func (r *objectReader) uvarint(what string) uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *objectReader) varint(what string) int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a count of things that take at least each bytes apiece, and
// refuses one that what is left cannot hold (a huge count would allocate
// before the reads ran out).
func (r *objectReader) count(what string, each int) int {
	n := r.uvarint(what)
	if r.err == nil && n > uint64(len(r.b)/each) {
		r.fail(what)
		return 0
	}
	return int(n)
}

// bytes reads a length and that many bytes, not copied: the plan's bytes
// are kept while the plan is.
func (r *objectReader) bytes(what string) []byte {
	n := r.count(what, 1)
	if r.err != nil {
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// decodeObject reads a plan object of version 2 (raw opens with
// objectMagic).
func decodeObject(raw []byte) (*Object, error) {
	r := &objectReader{b: raw[len(objectMagic):]}
	hdr := r.bytes("the header")
	if r.err != nil {
		return nil, r.err
	}
	var sp Object
	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sp); err != nil {
		return nil, fmt.Errorf("%w: %w", formats.ErrCorrupt, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the plan's header", formats.ErrCorrupt)
	}
	if sp.Cache != nil {
		return nil, fmt.Errorf("%w: cache entries in the plan's header", formats.ErrCorrupt)
	}
	for i := range sp.Files {
		f := &sp.Files[i]
		const unitBytes = 5 // four varints and a flag, a byte each at least
		f.Units = make([]formats.Unit, r.count("the units of "+f.URL, unitBytes))
		for j := range f.Units {
			u := &f.Units[j]
			u.Rows, u.Bytes, u.Offset, u.Decoded = r.varint("a unit"), r.varint("a unit"), r.varint("a unit"), r.varint("a unit")
			switch p := r.bytes1("a unit"); p {
			case 0, 1:
				u.Paged = p == 1
			default:
				r.fail("a unit's paged flag")
			}
		}
		f.hasUnits = true
	}
	sp.Cache = make([]CacheEntry, r.count("the cache entries", 2))
	for i := range sp.Cache {
		sp.Cache[i] = CacheEntry{Key: r.bytes("a cache key"), Value: r.bytes("a cache value")}
	}
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%w: %d bytes after the plan", formats.ErrCorrupt, len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	return &sp, nil
}

func (r *objectReader) bytes1(what string) byte {
	if len(r.b) == 0 {
		r.fail(what)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// errNoMagic is what a plan object that is neither version 1 (JSON) nor
// later (objectMagic) is refused with.
var errNoMagic = errors.New("not a plan object (neither JSON nor opened with the plan's magic)")
