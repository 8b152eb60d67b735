package parquet

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// checkStoredSchema checks the Arrow schema a writer may store in a Parquet
// footer (key "ARROW:schema": a base64 Arrow IPC schema message) before
// arrow-go decodes it. arrow-go trusts that message's flatbuffer: a length
// claiming billions of fields or children is one allocation of hundreds of
// gigabytes, a fatal out-of-memory no recover catches, and an offset of zero
// makes a field its own child, recursing until the stack overflows (also
// fatal). So every length the decoder allocates by must fit in the buffer,
// and the field tree must be a tree of bounded depth. Reads out of bounds the
// decoder turns into errors itself.
func checkStoredSchema(kv metadata.KeyValueMetadata) error {
	v := kv.FindValue("ARROW:schema")
	if v == nil {
		return nil
	}
	// Decoded as arrow-go decodes it: padded base64 first, then unpadded.
	var b []byte
	var err error
	if len(*v)%4 == 0 {
		b, err = base64.StdEncoding.DecodeString(*v)
	}
	if len(b) == 0 || err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(*v); err != nil {
			return nil // arrow-go refuses it too
		}
	}
	if err := checkIPCSchema(b); err != nil {
		return fmt.Errorf("stored Arrow schema: %w", err)
	}
	return nil
}

// maxArrowDepth bounds the nesting of a stored schema's fields.
const maxArrowDepth = 64

var errFlatbuf = errors.New("flatbuffer offset or length outside the message")

// checkIPCSchema checks an IPC message: continuation marker and length (or
// a bare length, before Arrow 0.15), a flatbuffer Message, and its body.
func checkIPCSchema(b []byte) error {
	if len(b) < 8 {
		return nil // too short to allocate anything: arrow-go reports it
	}
	off, size := int64(4), int64(int32(binary.LittleEndian.Uint32(b)))
	switch uint32(size) {
	case 0:
		return nil // end of stream: arrow-go reports it
	case 0xFFFFFFFF:
		off, size = 8, int64(int32(binary.LittleEndian.Uint32(b[4:])))
	}
	if size < 4 || size > int64(len(b))-off {
		return fmt.Errorf("message of %d bytes in %d", size, len(b)-int(off))
	}
	fb := flatbuf(b[off : off+size])
	body := int64(len(b)) - off - size

	// Message: version (slot 0), header_type (1), header (2), bodyLength (3).
	msg, err := fb.root()
	if err != nil {
		return err
	}
	if p, ok := msg.field(3); ok {
		n, err := fb.i64(p)
		if err != nil {
			return err
		}
		if n < 0 || n > body {
			return fmt.Errorf("message body of %d bytes in %d", n, body)
		}
	}
	const schemaHeader = 1
	if p, ok := msg.field(1); !ok || fb.u8(p) != schemaHeader {
		return nil // not a schema: arrow-go says so
	}
	p, ok := msg.field(2)
	if !ok {
		return nil
	}
	schema, err := fb.tableAt(p)
	if err != nil {
		return err
	}
	// Schema: endianness (0), fields (1), custom_metadata (2), features (3).
	w := fieldWalker{fb: fb, budget: int64(len(fb)) / 4}
	if err := w.fields(schema, 1, 0); err != nil {
		return err
	}
	_, _, err = fb.vectorOf(schema, 2, 4)
	return err
}

// fieldWalker visits a schema's field tree. budget is the number of fields
// the buffer can hold as a tree (each is at least a 4-byte offset in some
// vector); visiting more means fields are shared, and decoding would repeat
// them.
type fieldWalker struct {
	fb     flatbuf
	budget int64
}

// fields visits the vector of Field tables in slot of t.
func (w *fieldWalker) fields(t fbTable, slot int, depth int) error {
	start, ok, err := w.fb.vectorOf(t, slot, 4)
	if err != nil || !ok {
		return err
	}
	n, _ := w.fb.u32(start - 4)
	for i := range n {
		w.budget--
		if w.budget < 0 {
			return errors.New("fields are shared or repeated")
		}
		if depth >= maxArrowDepth {
			return fmt.Errorf("fields nest deeper than %d", maxArrowDepth)
		}
		f, err := w.fb.tableAt(start + 4*i)
		if err != nil {
			return err
		}
		// Field: name (0), nullable (1), type_type (2), type (3),
		// dictionary (4), children (5), custom_metadata (6).
		if err := w.fields(f, 5, depth+1); err != nil {
			return err
		}
		if _, _, err := w.fb.vectorOf(f, 6, 4); err != nil {
			return err
		}
	}
	return nil
}

// flatbuf reads a flatbuffer with every offset checked.
type flatbuf []byte

// fbTable is a table's position and its vtable's.
type fbTable struct {
	fb          flatbuf
	pos, vt, vn int64 // vn: the vtable's size in bytes
}

func (b flatbuf) u32(p int64) (int64, error) {
	if p < 0 || p > int64(len(b))-4 {
		return 0, errFlatbuf
	}
	return int64(binary.LittleEndian.Uint32(b[p:])), nil
}

func (b flatbuf) i64(p int64) (int64, error) {
	if p < 0 || p > int64(len(b))-8 {
		return 0, errFlatbuf
	}
	return int64(binary.LittleEndian.Uint64(b[p:])), nil
}

func (b flatbuf) u8(p int64) byte {
	if p < 0 || p >= int64(len(b)) {
		return 0
	}
	return b[p]
}

func (b flatbuf) root() (fbTable, error) { return b.tableAt(0) }

// tableAt follows the offset stored at p to a table.
func (b flatbuf) tableAt(p int64) (fbTable, error) {
	off, err := b.u32(p)
	if err != nil {
		return fbTable{}, err
	}
	pos := p + off
	soff, err := b.u32(pos)
	if err != nil {
		return fbTable{}, err
	}
	vt := pos - int64(int32(soff))
	if vt < 0 || vt > int64(len(b))-4 {
		return fbTable{}, errFlatbuf
	}
	vn := int64(binary.LittleEndian.Uint16(b[vt:]))
	if vn < 4 || vt+vn > int64(len(b)) {
		return fbTable{}, errFlatbuf
	}
	return fbTable{fb: b, pos: pos, vt: vt, vn: vn}, nil
}

// field returns where slot's value is, if the table has it.
func (t fbTable) field(slot int) (int64, bool) {
	e := 4 + 2*int64(slot)
	if e+2 > t.vn {
		return 0, false
	}
	o := int64(binary.LittleEndian.Uint16(t.fb[t.vt+e:]))
	return t.pos + o, o != 0
}

// vectorOf checks the vector in slot of t, of elements of elemSize bytes,
// and returns where its elements start.
func (b flatbuf) vectorOf(t fbTable, slot int, elemSize int64) (start int64, ok bool, err error) {
	p, ok := t.field(slot)
	if !ok {
		return 0, false, nil
	}
	off, err := b.u32(p)
	if err != nil {
		return 0, false, err
	}
	v := p + off
	n, err := b.u32(v)
	if err != nil {
		return 0, false, err
	}
	if n > (int64(len(b))-v-4)/elemSize {
		return 0, false, fmt.Errorf("vector of %d elements in %d bytes", n, int64(len(b))-v-4)
	}
	return v + 4, true, nil
}
