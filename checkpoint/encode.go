package checkpoint

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// The envelope around an encoded state:
//
//	offset  size  field
//	0       4     magic "SLCK"
//	4       2     format version, big-endian uint16 (the oldest that holds the state, see Encode)
//	6       4     payload length n, big-endian uint32
//	10      n     payload: the state as a msgpack map (see encodePayload)
//	10+n    4     CRC-32C (Castagnoli) of bytes [0, 10+n), big-endian
//
// Only the payload's layout changes with the format version; the frame around
// it stays as it is, so any build can check the checksum of any version and
// tell damage (ErrCorrupt) apart from a state too new for it (*VersionError).
// A frame that had to change would get a new magic. The checksum covers the
// header too, so a flipped bit in the version or length is caught as well.
const (
	magic       = "SLCK"
	frameHeader = 10
	frameCRC    = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// formatReaders holds, by format version, the function that turns a payload
// of that version into the current State. A reader for an old version decodes
// its own layout and then upgrades it, so that every version ever written
// stays readable: when the layout changes, StateVersion goes up, the new
// layout is written, and the old reader stays here followed by an upgrade
// step. Version 2 added Skipped; a version 1 state has none. Version 3
// added Epochs and Incarnation; a state before it has every split in Epoch
// and no incarnation. Version 4 added BatchSize and BatchesLeft; a state
// before it counts none (0). Version 5 added ShufflePasses; a state before
// it reads every chunk once (0). Version 6 changed no field: its lists
// (cursors, skipped, epochs) hold the entries of the splits the state
// speaks for only, where every earlier version holds one per split (see
// sparseSplits); its reader puts the others back as a rank's dataset
// leaves them.
var formatReaders = map[int]func(payload []byte) (State, error){
	1: decodeV1,
	2: decodeV2,
	3: decodeV3,
	4: decodeV4,
	5: decodeV5,
	6: decodeV6,
}

// sparseSplits is the most splits a rank's state (at a world size above
// one) is written for with an entry per split, in the oldest version that
// holds it. Past it, a state whose entries of other ranks' splits are as a
// dataset leaves them (zero cursors, no skipped rows, the state's epoch) is
// written in version 6, with its own splits' entries only: those others
// are then most of the state (at 8,192 splits and 1,024 ranks, 8,184
// cursors of 8,192, 32 KiB of 33), every rank's state repeats them, and a
// step of W ranks would cost its store and Merge W times the splits to
// read. Up to it they cost little (4 bytes a split), and the state stays
// readable by builds before version 6.
const sparseSplits = 256

// sparse reports whether st is written in version 6 (see sparseSplits).
func (st *State) sparse() bool {
	return st.Rank >= 0 && st.WorldSize > 1 && st.NumSplits > sparseSplits && st.othersEmpty()
}

// Encode returns st framed and checksummed, in the oldest format version
// that holds it: version 1 unless a split counts skipped rows (2), splits
// differ in epoch or the state names an incarnation (3), it counts
// batches left for equal batches per rank (4), or its epochs read every
// chunk in several passes (5), so that a job that needs
// none of them writes states that older builds still read; a rank's
// state of more than sparseSplits splits is written in version 6, with
// its own splits' entries only. It
// refuses a state that fails Validate, so that whatever is written can be
// read back.
func Encode(st State) ([]byte, error) {
	err := st.Validate()
	if err != nil {
		return nil, err
	}
	lists := own{cursors: st.Cursors, skipped: st.Skipped}
	if st.hasEpochs() {
		lists.epochs = st.Epochs
	}
	version := 1
	switch {
	case st.sparse():
		version = 6
		if lists, err = st.own(); err != nil {
			return nil, err
		}
	case st.ShufflePasses > 1:
		version = 5
	case st.BatchSize > 0:
		version = 4
	case st.hasEpochs() || st.Incarnation != "":
		version = 3
	case st.hasSkipped():
		version = 2
	}
	var buf bytes.Buffer
	buf.Grow(frameHeader + 128 + 24*len(lists.cursors) + 16*len(st.Columns) + len(st.Plan) + len(st.Fingerprint))
	buf.WriteString(magic)
	buf.Write([]byte{0, 0, 0, 0, 0, 0}) // version and length, filled in below
	if err := encodePayload(&buf, &st, &lists, version); err != nil {
		return nil, fmt.Errorf("checkpoint: encode state: %w", err)
	}
	b := buf.Bytes()
	n := len(b) - frameHeader
	if uint64(n) > math.MaxUint32 {
		return nil, fmt.Errorf("checkpoint: encode state: payload of %d bytes is too large", n)
	}
	binary.BigEndian.PutUint16(b[4:], uint16(version))
	binary.BigEndian.PutUint32(b[6:], uint32(n))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// Decode reads a state written by Encode of this or an older build, upgrades
// it to the current layout and validates it. Malformed input yields an error
// wrapping ErrCorrupt; a newer format version yields a *VersionError. Decode
// never panics and allocates in proportion to len(b) at most.
func Decode(b []byte) (State, error) {
	return guard(func() (State, error) { return decode(b, formatReaders, StateVersion) })
}

// guard runs a decoder with a recover around it, and prefixes its errors
// with the package's name. The decoders are written not to panic and
// FuzzDecode checks that without this net; it is here because a panic
// escaping into a training loop over one bad file would be far worse than
// an error.
func guard[T any](decode func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			var zero T
			v, err = zero, corrupt("decoder panic: %v", r)
		}
		if err != nil {
			err = fmt.Errorf("checkpoint: %w", err)
		}
	}()
	return decode()
}

// decode is Decode without its recover and prefix, with the version table as
// a parameter so a test can show how an older version is routed and upgraded.
func decode(b []byte, readers map[int]func([]byte) (State, error), newest int) (State, error) {
	version, payload, err := unframe(b, newest)
	if err != nil {
		return State{}, err
	}
	read := readers[version]
	if read == nil {
		return State{}, corrupt("unknown format version %d", version)
	}
	st, err := read(payload)
	if err != nil {
		return State{}, err
	}
	st.Version = StateVersion
	if !st.hasSkipped() {
		st.Skipped = nil // all zero reads as none, as it is written
	}
	if !st.hasEpochs() {
		st.Epochs = nil // every split in Epoch reads as none, as it is written
	}
	if err := st.Validate(); err != nil {
		return State{}, corruptWrap(err, "invalid contents")
	}
	return st, nil
}

// unframe checks the envelope and returns the format version and the
// payload.
func unframe(b []byte, newest int) (int, []byte, error) {
	if len(b) < 4 || string(b[:4]) != magic {
		return 0, nil, corrupt("bad magic %q, not a sluice checkpoint", b[:min(len(b), 4)])
	}
	if len(b) < frameHeader+frameCRC {
		return 0, nil, corrupt("truncated: %d bytes, shorter than an empty frame", len(b))
	}
	n := uint64(binary.BigEndian.Uint32(b[6:]))
	if have := uint64(len(b) - frameHeader - frameCRC); n != have {
		if n > have {
			return 0, nil, corrupt("truncated: header promises a %d-byte payload, %d bytes present", n, have)
		}
		return 0, nil, corrupt("%d bytes of trailing garbage after the payload", have-n)
	}
	end := frameHeader + int(n)
	want := binary.BigEndian.Uint32(b[end:])
	if got := crc32.Checksum(b[:end], castagnoli); got != want {
		return 0, nil, corrupt("checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	version := int(binary.BigEndian.Uint16(b[4:]))
	if version > newest {
		return 0, nil, &VersionError{Version: version, Max: newest}
	}
	return version, b[frameHeader:end], nil
}

// decodeOwn is Decode giving the state's own entries (see own): a version
// 6 state is read as it is stored, without the entries of other ranks'
// splits that Decode puts back, so that reading every rank's state of a
// step costs in proportion to the splits. An older version is decoded
// whole first.
func decodeOwn(b []byte) (own, error) {
	return guard(func() (own, error) {
		version, payload, err := unframe(b, StateVersion)
		if err != nil {
			return own{}, err
		}
		if version == 6 {
			return decodeOwnPayload(payload)
		}
		st, err := decode(b, formatReaders, StateVersion)
		if err != nil {
			return own{}, err
		}
		o, err := st.own()
		if err != nil {
			return own{}, corruptWrap(err, "invalid contents")
		}
		return o, nil
	})
}

// Version 1 payload: a msgpack map holding exactly these keys, in this order
// when written (any order is read). Integers use msgpack's shortest form;
// cursors are [window, offset, rows] triples so that a state with thousands
// of splits stays small.
var v1Fields = [...]string{
	"version", "fingerprint", "plan", "columns", "seed", "epoch", "shuffle",
	"clump_size", "shuffle_window", "num_splits", "drop_remainder",
	"world_size", "rank", "cursors", "next",
}

// Version 2 payload: version 1's fields and "skipped", an array of one
// count per split.
var v2Fields = [...]string{
	"version", "fingerprint", "plan", "columns", "seed", "epoch", "shuffle",
	"clump_size", "shuffle_window", "num_splits", "drop_remainder",
	"world_size", "rank", "cursors", "next", "skipped",
}

// Version 3 payload: version 2's fields, "epochs", an array of one epoch
// per split or an empty one where every split is in "epoch", and
// "incarnation", a string ("" for none).
var v3Fields = [...]string{
	"version", "fingerprint", "plan", "columns", "seed", "epoch", "shuffle",
	"clump_size", "shuffle_window", "num_splits", "drop_remainder",
	"world_size", "rank", "cursors", "next", "skipped", "epochs", "incarnation",
}

// Version 4 payload: version 3's fields, "batch_size" and "batches_left".
var v4Fields = [...]string{
	"version", "fingerprint", "plan", "columns", "seed", "epoch", "shuffle",
	"clump_size", "shuffle_window", "num_splits", "drop_remainder",
	"world_size", "rank", "cursors", "next", "skipped", "epochs", "incarnation",
	"batch_size", "batches_left",
}

// Version 5 payload: version 4's fields and "shuffle_passes".
var v5Fields = [...]string{
	"version", "fingerprint", "plan", "columns", "seed", "epoch", "shuffle",
	"clump_size", "shuffle_window", "num_splits", "drop_remainder",
	"world_size", "rank", "cursors", "next", "skipped", "epochs", "incarnation",
	"batch_size", "batches_left", "shuffle_passes",
}

// fieldCount is the number of fields of a version's payload.
func fieldCount(version int) int {
	switch {
	case version >= 5:
		return len(v5Fields)
	case version == 4:
		return len(v4Fields)
	case version == 3:
		return len(v3Fields)
	case version == 2:
		return len(v2Fields)
	}
	return len(v1Fields)
}

// encodePayload writes st as a payload of version (1 to 6), with lists
// for its per-split lists: one entry per split, or in version 6 per split
// st speaks for.
func encodePayload(w io.Writer, st *State, lists *own, version int) error {
	e := msgpack.GetEncoder()
	defer msgpack.PutEncoder(e)
	e.Reset(w)
	// Errors of the writes below can only come from w, a bytes.Buffer that
	// does not fail, so the first is kept rather than each checked.
	var first error
	put := func(err error) {
		if first == nil {
			first = err
		}
	}
	put(e.EncodeMapLen(fieldCount(version)))
	key := func(k string) { put(e.EncodeString(k)) }
	key("version")
	put(e.EncodeInt(int64(version)))
	key("fingerprint")
	put(e.EncodeString(st.Fingerprint))
	key("plan")
	put(e.EncodeString(st.Plan))
	key("columns")
	put(e.EncodeArrayLen(len(st.Columns)))
	for _, c := range st.Columns {
		put(e.EncodeString(c))
	}
	key("seed")
	put(e.EncodeUint(st.Seed))
	key("epoch")
	put(e.EncodeInt(st.Epoch))
	key("shuffle")
	put(e.EncodeBool(st.Shuffle))
	key("clump_size")
	put(e.EncodeInt(int64(st.ClumpSize)))
	key("shuffle_window")
	put(e.EncodeInt(int64(st.ShuffleWindow)))
	key("num_splits")
	put(e.EncodeInt(int64(st.NumSplits)))
	key("drop_remainder")
	put(e.EncodeBool(st.DropRemainder))
	key("world_size")
	put(e.EncodeInt(int64(st.WorldSize)))
	key("rank")
	put(e.EncodeInt(int64(st.Rank)))
	key("cursors")
	put(e.EncodeArrayLen(len(lists.cursors)))
	for _, c := range lists.cursors {
		put(e.EncodeArrayLen(3))
		put(e.EncodeInt(int64(c.Window)))
		put(e.EncodeInt(c.Offset))
		put(e.EncodeInt(c.Rows))
	}
	key("next")
	put(e.EncodeInt(int64(st.Next)))
	if version >= 2 {
		key("skipped")
		put(e.EncodeArrayLen(len(lists.skipped)))
		for _, n := range lists.skipped {
			put(e.EncodeInt(n))
		}
	}
	if version >= 3 {
		key("epochs")
		put(e.EncodeArrayLen(len(lists.epochs)))
		for _, n := range lists.epochs {
			put(e.EncodeInt(n))
		}
		key("incarnation")
		put(e.EncodeString(st.Incarnation))
	}
	if version >= 4 {
		key("batch_size")
		put(e.EncodeInt(int64(st.BatchSize)))
		key("batches_left")
		put(e.EncodeInt(st.BatchesLeft))
	}
	if version >= 5 {
		key("shuffle_passes")
		put(e.EncodeInt(int64(st.ShufflePasses)))
	}
	return first
}

// minCursorBytes is the smallest encoding of a cursor: a fixarray header and
// three positive fixints. A declared cursor count is checked against it
// before the slice is made, so a few bytes cannot claim millions of cursors.
const minCursorBytes = 4

func decodeV1(p []byte) (State, error) { return decodePayload(p, 1) }

func decodeV2(p []byte) (State, error) { return decodePayload(p, 2) }

func decodeV3(p []byte) (State, error) { return decodePayload(p, 3) }

func decodeV4(p []byte) (State, error) { return decodePayload(p, 4) }

func decodeV5(p []byte) (State, error) { return decodePayload(p, 5) }

// decodeV6 reads a payload of a state's own entries and puts back the
// other splits' as a rank's dataset leaves them.
func decodeV6(p []byte) (State, error) {
	o, err := decodeOwnPayload(p)
	if err != nil {
		return State{}, err
	}
	return o.state(), nil
}

// decodeOwnPayload reads a version 6 payload as what it holds: a state's
// own entries, checked.
func decodeOwnPayload(p []byte) (own, error) {
	st, err := decodePayload(p, 6)
	if err != nil {
		return own{}, err
	}
	o := own{head: st, cursors: st.Cursors, skipped: st.Skipped, epochs: st.Epochs}
	o.head.Cursors, o.head.Skipped, o.head.Epochs = nil, nil, nil
	o.head.Version = StateVersion
	o.canonical()
	if err := o.validate(); err != nil {
		return own{}, corruptWrap(err, "invalid contents")
	}
	return o, nil
}

// decodePayload reads a payload of version (1 to 6).
func decodePayload(p []byte, version int) (State, error) {
	r := &payloadReader{br: bytes.NewReader(p), version: version}
	// bytes.Reader is an io.ByteScanner, so the msgpack decoder reads from it
	// directly without buffering ahead; that keeps br.Len() the exact count
	// of undecoded bytes, which every length check below relies on.
	r.d = msgpack.GetDecoder()
	defer msgpack.PutDecoder(r.d)
	r.d.Reset(r.br)
	var st State
	n, err := r.d.DecodeMapLen()
	if err != nil {
		return State{}, corruptWrap(err, "payload is not a msgpack map")
	}
	if want := fieldCount(version); n != want {
		return State{}, corrupt("payload has %d fields, version %d has %d", n, version, want)
	}
	var seen [len(v5Fields)]bool
	var keyBuf [32]byte
	for range n {
		k, err := r.bytes(field{name: "map key", index: -1}, keyBuf[:])
		if err != nil {
			return State{}, err
		}
		i := fieldIndex(k)
		if i < 0 || i >= fieldCount(version) {
			return State{}, corrupt("unknown field %q in a version %d payload", k, version)
		}
		if seen[i] {
			return State{}, corrupt("field %q appears twice", k)
		}
		seen[i] = true
		if err := r.field(field{name: v5Fields[i], index: -1}, &st); err != nil {
			return State{}, err
		}
	}
	if left := r.br.Len(); left != 0 {
		return State{}, corrupt("%d bytes after the payload map", left)
	}
	return st, nil
}

// fieldIndex is k's index in v5Fields (whose first fields are those of
// the versions before it), or -1.
func fieldIndex(k []byte) int {
	for i, f := range v5Fields {
		if f == string(k) {
			return i
		}
	}
	return -1
}

// payloadReader decodes msgpack values with every declared length checked
// against the bytes left before anything of that length is allocated.
type payloadReader struct {
	br      *bytes.Reader
	d       *msgpack.Decoder
	version int
}

// field names a value in errors; it is formatted only when an error is
// made, so decoding many cursors costs no string building.
type field struct {
	name  string
	index int // element of a list, or -1
	part  string
}

func (f field) String() string {
	switch {
	case f.index < 0:
		return f.name
	case f.part == "":
		return fmt.Sprintf("%s[%d]", f.name, f.index)
	}
	return fmt.Sprintf("%s[%d].%s", f.name, f.index, f.part)
}

func (r *payloadReader) field(k field, st *State) (err error) {
	switch k.name {
	case "version":
		var v int
		if v, err = r.int(k); err == nil && v != r.version {
			err = corrupt("field version is %d in a version %d payload", v, r.version)
		}
	case "fingerprint":
		st.Fingerprint, err = r.str(k, r.br.Len())
	case "plan":
		st.Plan, err = r.str(k, r.br.Len())
	case "columns":
		st.Columns, err = r.strs(k)
	case "seed":
		st.Seed, err = r.uint64(k)
	case "epoch":
		st.Epoch, err = r.int64(k)
	case "shuffle":
		st.Shuffle, err = r.bool(k)
	case "clump_size":
		st.ClumpSize, err = r.int(k)
	case "shuffle_window":
		st.ShuffleWindow, err = r.int(k)
	case "num_splits":
		st.NumSplits, err = r.int(k)
	case "drop_remainder":
		st.DropRemainder, err = r.bool(k)
	case "world_size":
		st.WorldSize, err = r.int(k)
	case "rank":
		st.Rank, err = r.int(k)
	case "cursors":
		st.Cursors, err = r.cursors()
	case "next":
		st.Next, err = r.int(k)
	case "skipped":
		st.Skipped, err = r.int64s(k)
	case "epochs":
		st.Epochs, err = r.int64s(k)
	case "incarnation":
		st.Incarnation, err = r.str(k, MaxIncarnation)
	case "batch_size":
		st.BatchSize, err = r.int(k)
	case "batches_left":
		st.BatchesLeft, err = r.int64(k)
	case "shuffle_passes":
		st.ShufflePasses, err = r.int(k)
	}
	return err
}

// arrayLen returns a declared array length, refused when the bytes left
// cannot hold that many elements of at least minElem bytes each.
func (r *payloadReader) arrayLen(what field, minElem int) (int, error) {
	n, err := r.d.DecodeArrayLen()
	if err != nil {
		return 0, corruptWrap(err, "field %s", what)
	}
	if n < 0 {
		return 0, nil // msgpack nil: an absent list
	}
	if left := r.br.Len(); n > left/minElem {
		return 0, corrupt("field %s declares %d elements with %d bytes left", what, n, left)
	}
	return n, nil
}

func (r *payloadReader) str(what field, limit int) (string, error) {
	n, err := r.d.DecodeBytesLen()
	if err != nil {
		return "", corruptWrap(err, "field %s", what)
	}
	if n < 0 {
		return "", corrupt("field %s is nil, not a string", what)
	}
	if n > limit || n > r.br.Len() {
		return "", corrupt("field %s declares a %d-byte string with %d bytes left", what, n, r.br.Len())
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.br, b); err != nil {
		return "", corruptWrap(err, "field %s", what)
	}
	return string(b), nil
}

// bytes reads a string into buf, whose length is the limit, without
// allocating: field names are only compared, never kept.
func (r *payloadReader) bytes(what field, buf []byte) ([]byte, error) {
	n, err := r.d.DecodeBytesLen()
	if err != nil {
		return nil, corruptWrap(err, "field %s", what)
	}
	if n < 0 || n > len(buf) || n > r.br.Len() {
		return nil, corrupt("field %s declares a %d-byte string with %d bytes left", what, n, r.br.Len())
	}
	if _, err := io.ReadFull(r.br, buf[:n]); err != nil {
		return nil, corruptWrap(err, "field %s", what)
	}
	return buf[:n], nil
}

func (r *payloadReader) strs(what field) ([]string, error) {
	n, err := r.arrayLen(what, 1)
	if err != nil || n == 0 {
		// An empty list decodes as nil, so nil and empty Columns encode
		// alike and a decoded state re-encodes to the same bytes.
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		if out[i], err = r.str(field{name: what.name, index: i}, r.br.Len()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r *payloadReader) cursors() ([]Cursor, error) {
	n, err := r.arrayLen(field{name: "cursors", index: -1}, minCursorBytes)
	if err != nil || n == 0 {
		return nil, err
	}
	out := make([]Cursor, n)
	for i := range out {
		what := field{name: "cursors", index: i}
		m, err := r.d.DecodeArrayLen()
		if err != nil {
			return nil, corruptWrap(err, "field %s", what)
		}
		if m != 3 {
			return nil, corrupt("field %s has %d elements, want 3", what, m)
		}
		c := &out[i]
		what.part = "window"
		if c.Window, err = r.int(what); err != nil {
			return nil, err
		}
		what.part = "offset"
		if c.Offset, err = r.int64(what); err != nil {
			return nil, err
		}
		what.part = "rows"
		if c.Rows, err = r.int64(what); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// notNil refuses msgpack nil where a number or bool belongs: the library
// would read it as zero, and a state should not silently gain a zero.
func (r *payloadReader) notNil(what field) error {
	c, err := r.d.PeekCode()
	if err != nil {
		return corruptWrap(err, "field %s", what)
	}
	if c == msgpcode.Nil {
		return corrupt("field %s is nil", what)
	}
	return nil
}

func (r *payloadReader) int64(what field) (int64, error) {
	if err := r.notNil(what); err != nil {
		return 0, err
	}
	c, _ := r.d.PeekCode()
	if c == msgpcode.Uint64 {
		// DecodeInt64 would wrap values above MaxInt64 to negatives.
		u, err := r.d.DecodeUint64()
		if err != nil {
			return 0, corruptWrap(err, "field %s", what)
		}
		if u > math.MaxInt64 {
			return 0, corrupt("field %s value %d overflows int64", what, u)
		}
		return int64(u), nil
	}
	v, err := r.d.DecodeInt64()
	if err != nil {
		return 0, corruptWrap(err, "field %s", what)
	}
	return v, nil
}

func (r *payloadReader) int(what field) (int, error) {
	v, err := r.int64(what)
	if err == nil && int64(int(v)) != v {
		err = corrupt("field %s value %d overflows int", what, v)
	}
	return int(v), err
}

func (r *payloadReader) uint64(what field) (uint64, error) {
	if err := r.notNil(what); err != nil {
		return 0, err
	}
	c, _ := r.d.PeekCode()
	if msgpcode.IsFixedNum(c) && int8(c) < 0 || c == msgpcode.Int8 || c == msgpcode.Int16 || c == msgpcode.Int32 || c == msgpcode.Int64 {
		// DecodeUint64 would wrap negatives to huge values.
		v, err := r.d.DecodeInt64()
		if err != nil {
			return 0, corruptWrap(err, "field %s", what)
		}
		if v < 0 {
			return 0, corrupt("field %s value %d is negative", what, v)
		}
		return uint64(v), nil
	}
	u, err := r.d.DecodeUint64()
	if err != nil {
		return 0, corruptWrap(err, "field %s", what)
	}
	return u, nil
}

func (r *payloadReader) bool(what field) (bool, error) {
	if err := r.notNil(what); err != nil {
		return false, err
	}
	v, err := r.d.DecodeBool()
	if err != nil {
		return false, corruptWrap(err, "field %s", what)
	}
	return v, nil
}
