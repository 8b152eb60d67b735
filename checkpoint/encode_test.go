package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// testState returns a valid state of one rank with distinct cursors, so
// that a merge or a round trip that loses or swaps one shows.
func testState(rank, world, splits int) State {
	st := State{
		Version:       StateVersion,
		Plan:          "plan-0f3a",
		Columns:       []string{"features", "label"},
		Seed:          42,
		Epoch:         3,
		Shuffle:       true,
		ClumpSize:     16,
		ShuffleWindow: 4096,
		NumSplits:     splits,
		WorldSize:     world,
		Rank:          rank,
		Next:          min(1, splits/world-1),
	}
	st.Fingerprint = st.OrderFingerprint()
	st.Cursors = make([]Cursor, splits)
	for s := range st.Cursors {
		if st.Owns(s) {
			st.Cursors[s] = Cursor{Window: s + 1, Offset: int64(1000*s + rank), Rows: int64(5000*s + 7)}
		}
	}
	return st
}

// frame wraps a payload in an envelope of the given version with a correct
// checksum, as Encode would, so tests reach the payload decoder.
func frame(version uint16, payload []byte) []byte {
	b := []byte(magic)
	b = binary.BigEndian.AppendUint16(b, version)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, payload...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func mustEncode(t testing.TB, st State) []byte {
	t.Helper()
	b, err := Encode(st)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return b
}

func TestEncodeRoundTrip(t *testing.T) {
	merged, err := Merge(testState(0, 2, 4), testState(1, 2, 4))
	if err != nil {
		t.Fatal(err)
	}
	extreme := testState(0, 1, 1)
	extreme.Seed = math.MaxUint64
	extreme.Epoch = math.MaxInt64
	extreme.Columns = nil
	extreme.Plan = strings.Repeat("p", 70000) // a str32 length
	extreme.Cursors[0] = Cursor{Window: math.MaxInt32, Offset: math.MaxInt64, Rows: math.MaxInt64}
	unicode := testState(2, 4, 8)
	unicode.Columns = []string{"", "naïve ☃", "a\x00b"}
	for name, st := range map[string]State{
		"rank":    testState(1, 4, 64),
		"merged":  merged,
		"extreme": extreme,
		"unicode": unicode,
	} {
		t.Run(name, func(t *testing.T) {
			b := mustEncode(t, st)
			got, err := Decode(b)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, st) {
				t.Fatalf("round trip changed the state:\n got %+v\nwant %+v", got, st)
			}
			if again := mustEncode(t, got); !bytes.Equal(again, b) {
				t.Fatal("re-encoding a decoded state gave other bytes")
			}
		})
	}
}

func TestEncodeRefusesInvalid(t *testing.T) {
	st := testState(0, 2, 4)
	st.Cursors = st.Cursors[:3]
	if _, err := Encode(st); err == nil || !strings.Contains(err.Error(), "cursors") {
		t.Fatalf("Encode of a state with too few cursors: %v", err)
	}
}

func TestDecodeDamage(t *testing.T) {
	good := mustEncode(t, testState(1, 2, 8))
	check := func(t *testing.T, what string, b []byte) {
		t.Helper()
		_, err := Decode(b)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: got %v, want ErrCorrupt", what, err)
		}
		if !strings.HasPrefix(err.Error(), "checkpoint: corrupt state: ") {
			t.Fatalf("%s: message %q", what, err)
		}
	}
	check(t, "empty", nil)
	check(t, "other file", []byte("PAR1 this is parquet"))
	for n := range len(good) {
		check(t, "truncated", good[:n])
	}
	check(t, "trailing garbage", append(bytes.Clone(good), 0))
	for i := range len(good) * 8 {
		b := bytes.Clone(good)
		b[i/8] ^= 1 << (i % 8)
		check(t, "bit flip", b)
	}
	_, err := Decode(good[:len(good)-1])
	if err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("truncation not named: %v", err)
	}
	b := bytes.Clone(good)
	b[len(b)/2] ^= 0x10
	if _, err := Decode(b); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("bit flip not named as a checksum mismatch: %v", err)
	}
}

func TestDecodeNewerVersion(t *testing.T) {
	_, err := Decode(frame(7, []byte{0x80}))
	const want = "checkpoint: state format version 7 needs a newer sluice (this build reads up to 6)"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	if !errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("%v should wrap ErrUnsupportedVersion and not ErrCorrupt", err)
	}
	var ve *VersionError
	if !errors.As(err, &ve) || ve.Version != 7 || ve.Max != StateVersion {
		t.Fatalf("errors.As gave %+v", ve)
	}
	if _, err := Decode(frame(0, []byte{0x80})); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 0: got %v, want ErrCorrupt", err)
	}
}

// TestDecodeUpgradesOlderVersion shows how a layout change is absorbed: a
// build whose newest format is 2 keeps the reader of version 1, which
// upgrades what it reads, and each envelope goes to its version's reader.
func TestDecodeUpgradesOlderVersion(t *testing.T) {
	var routed []string
	readers := map[int]func([]byte) (State, error){
		1: func(p []byte) (State, error) {
			routed = append(routed, "v1")
			st, err := decodeV1(p)
			st.ShuffleWindow *= 2 // the "upgrade": version 2 counts the window in half-rows, say
			return st, err
		},
		2: func(p []byte) (State, error) {
			routed = append(routed, "v2")
			return decodeV1(p)
		},
	}
	payload := mustEncode(t, testState(0, 1, 2))
	payload = payload[frameHeader : len(payload)-frameCRC]
	old, err := decode(frame(1, payload), readers, 2)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := decode(frame(2, payload), readers, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(routed, []string{"v1", "v2"}) || old.ShuffleWindow != 2*cur.ShuffleWindow {
		t.Fatalf("routed %v, windows %d and %d", routed, old.ShuffleWindow, cur.ShuffleWindow)
	}
	if old.Version != StateVersion {
		t.Fatalf("upgraded state has version %d", old.Version)
	}
	var ve *VersionError
	if _, err := decode(frame(3, payload), readers, 2); !errors.As(err, &ve) || ve.Max != 2 {
		t.Fatalf("version 3 with newest 2: %v", err)
	}
}

// v1Payload writes the payload Encode writes for st (version 1 for the
// states most tests give it) with the fields of st, except that a field
// named in over is written by that function instead (and skipped if it is
// nil), and extra fields are appended. The declared map length is n, or
// the number of fields written if n < 0.
func v1Payload(t testing.TB, st State, over map[string]func(e *msgpack.Encoder), n int) []byte {
	t.Helper()
	var body bytes.Buffer
	ref := mustEncode(t, st)
	d := msgpack.NewDecoder(bytes.NewReader(ref[frameHeader : len(ref)-frameCRC]))
	fields, err := d.DecodeMapLen()
	if err != nil {
		t.Fatal(err)
	}
	e := msgpack.NewEncoder(&body)
	count := 0
	for range fields {
		k, err := d.DecodeString()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := d.DecodeRaw()
		if err != nil {
			t.Fatal(err)
		}
		fn, overridden := over[k]
		if overridden && fn == nil {
			continue
		}
		count++
		_ = e.EncodeString(k)
		if overridden {
			fn(e)
		} else {
			_ = e.Encode(raw)
		}
	}
	for k, fn := range over {
		if fieldIndex([]byte(k)) < 0 {
			count++
			_ = e.EncodeString(k)
			fn(e)
		}
	}
	if n < 0 {
		n = count
	}
	var out bytes.Buffer
	_ = msgpack.NewEncoder(&out).EncodeMapLen(n)
	out.Write(body.Bytes())
	return out.Bytes()
}

// hostilePayloads are well-framed payloads that must each be refused; the
// value is a part of the error text that shows it was refused for the
// intended reason.
type hostile struct {
	payload []byte
	want    string
}

func hostilePayloads(t testing.TB) map[string]hostile {
	type over = map[string]func(*msgpack.Encoder)
	st := testState(0, 2, 4)
	with := func(o over) []byte { return v1Payload(t, st, o, -1) }
	raw := func(b ...byte) func(e *msgpack.Encoder) {
		return func(e *msgpack.Encoder) { _ = e.Encode(msgpack.RawMessage(b)) }
	}
	huge := raw(0xdd, 0x7f, 0xff, 0xff, 0xff) // array32 of 2^31-1
	return map[string]hostile{
		"not a map":          {[]byte{0x93, 1, 2, 3}, "not a msgpack map"},
		"empty":              {[]byte{}, "not a msgpack map"},
		"huge map":           {[]byte{0xdf, 0xff, 0xff, 0xff, 0xff}, "4294967295 fields"},
		"huge cursors":       {with(over{"cursors": huge}), "cursors declares 2147483647"},
		"huge columns":       {with(over{"columns": huge}), "columns declares 2147483647"},
		"huge string":        {with(over{"plan": raw(0xdb, 0x7f, 0xff, 0xff, 0xff)}), "plan declares a 2147483647-byte"},
		"long field name":    {with(over{"next": nil, strings.Repeat("x", 100): raw(1)}), "map key declares a 100-byte"},
		"unknown field":      {with(over{"next": nil, "nxt": raw(0)}), `unknown field "nxt"`},
		"missing field":      {with(over{"next": nil}), "14 fields"},
		"duplicate field":    {append(v1Payload(t, st, over{"next": nil}, 15), 0xa4, 'p', 'l', 'a', 'n', 0xa1, 'x'), `"plan" appears twice`},
		"trailing bytes":     {append(with(nil), 0xc0), "1 bytes after"},
		"nil number":         {with(over{"epoch": raw(0xc0)}), "epoch is nil"},
		"nil bool":           {with(over{"shuffle": raw(0xc0)}), "shuffle is nil"},
		"nil string":         {with(over{"plan": raw(0xc0)}), "plan is nil"},
		"int64 overflow":     {with(over{"epoch": raw(0xcf, 0xff, 0, 0, 0, 0, 0, 0, 0)}), "overflows int64"},
		"negative seed":      {with(over{"seed": raw(0xff)}), "seed value -1 is negative"},
		"string for number":  {with(over{"num_splits": raw(0xa1, '4')}), "num_splits: msgpack"},
		"short cursor":       {with(over{"cursors": raw(0x94, 0x92, 0, 0, 0x93, 0, 0, 0, 0x93, 0, 0, 0, 0x93, 0, 0, 0)}), "cursors[0] has 2 elements"},
		"wrong version":      {with(over{"version": raw(2)}), "version is 2"},
		"fails Validate":     {with(over{"num_splits": raw(3)}), "4 cursors for num_splits 3"},
		"truncated in value": {with(over{"next": raw(0xcd, 0x01)}), "next: unexpected EOF"},
	}
}

func TestDecodeHostilePayloads(t *testing.T) {
	for name, h := range hostilePayloads(t) {
		t.Run(name, func(t *testing.T) {
			st, err := Decode(frame(1, h.payload))
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), h.want) {
				t.Fatalf("got %+v, %v; want ErrCorrupt saying %q", st, err, h.want)
			}
		})
	}
	// The helper itself must produce something decodable when unmodified,
	// or the cases above would pass for the wrong reason.
	if _, err := Decode(frame(1, v1Payload(t, testState(0, 2, 4), nil, -1))); err != nil {
		t.Fatalf("unmodified v1Payload: %v", err)
	}
}

// TestDecodeHugeDeclaredLengthAllocatesLittle feeds inputs of a few dozen
// bytes that declare 2^31 cursors, columns or string bytes. msgpack's own
// slice decoding would allocate for up to a million elements up front;
// Decode must refuse before allocating anything of that size.
func TestDecodeHugeDeclaredLengthAllocatesLittle(t *testing.T) {
	huge := []byte{0xdd, 0x7f, 0xff, 0xff, 0xff}
	for name, p := range map[string][]byte{
		"cursors": append([]byte{0x8f, 0xa7, 'c', 'u', 'r', 's', 'o', 'r', 's'}, huge...),
		"columns": append([]byte{0x8f, 0xa7, 'c', 'o', 'l', 'u', 'm', 'n', 's'}, huge...),
		"plan":    {0x8f, 0xa4, 'p', 'l', 'a', 'n', 0xdb, 0x7f, 0xff, 0xff, 0xff},
	} {
		t.Run(name, func(t *testing.T) {
			in := frame(1, append(p, make([]byte, 16)...))
			const runs = 200
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for range runs {
				if _, err := Decode(in); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "declares") {
					t.Fatalf("got %v, want ErrCorrupt naming the declared length", err)
				}
			}
			runtime.ReadMemStats(&after)
			perRun := (after.TotalAlloc - before.TotalAlloc) / runs
			t.Logf("%d-byte input: %d bytes allocated per Decode", len(in), perRun)
			if perRun > 4096 {
				t.Fatalf("Decode of a %d-byte input allocated %d bytes", len(in), perRun)
			}
		})
	}
}

// FuzzDecode checks that no input makes the decoder panic, and that any
// input it accepts is a state that survives another encode and decode
// unchanged. Each input is tried both as a whole envelope and as a payload
// in a correct frame: random bytes almost never pass the checksum, and
// without the second form the fuzzer would never reach the msgpack decoder.
func FuzzDecode(f *testing.F) {
	merged, err := Merge(testState(0, 2, 4), atBoundary(1, 2, 4))
	if err != nil {
		f.Fatal(err)
	}
	merged.Incarnation = "job-1"
	seeds := []State{testState(0, 1, 1), testState(3, 4, 64), withSkipped(1, 2, 4), merged, withLeft(withSkipped(0, 2, 4), 64, 9), withLeft(testState(0, 1, 2), 1, 0)}
	for _, st := range sparseStates() {
		seeds = append(seeds, st)
	}
	for _, st := range seeds {
		b := mustEncode(f, st)
		f.Add(b)
		f.Add(b[frameHeader : len(b)-frameCRC])
		f.Add(b[:len(b)/2])
		flipped := bytes.Clone(b)
		flipped[len(b)/3] ^= 4
		f.Add(flipped)
	}
	for _, h := range hostilePayloads(f) {
		f.Add(h.payload)
	}
	f.Add(frame(9, []byte{0x80}))
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, b := range [][]byte{in, frame(1, in), frame(2, in), frame(3, in), frame(4, in), frame(5, in), frame(6, in)} {
			// decode, not Decode: Decode's recover would hide a panic.
			st, err := decode(b, formatReaders, StateVersion)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupportedVersion) {
					t.Fatalf("error wraps no sentinel: %v", err)
				}
				continue
			}
			if err := st.Validate(); err != nil {
				t.Fatalf("decoded an invalid state: %v", err)
			}
			// A store reads the same bytes as the state's own entries.
			o, err := decodeOwn(b)
			if err != nil {
				t.Fatalf("Decode accepts what decodeOwn refuses: %v", err)
			}
			if want, err := st.own(); err != nil || !reflect.DeepEqual(o, want) {
				t.Fatalf("decodeOwn differs from the decoded state's own entries (%v):\n%+v\n%+v", err, o, want)
			}
			again, err := Encode(st)
			if err != nil {
				t.Fatalf("re-encode of a decoded state: %v", err)
			}
			st2, err := Decode(again)
			if err != nil {
				t.Fatalf("decode of a re-encoded state: %v", err)
			}
			if !reflect.DeepEqual(st, st2) {
				t.Fatalf("re-encode round trip changed the state:\n%+v\n%+v", st, st2)
			}
			if again2 := mustEncode(t, st2); !bytes.Equal(again, again2) {
				t.Fatal("encoding is not stable")
			}
		}
	})
}

// A rank's round-robin position indexes the splits it owns: a state whose
// position is past them came from another job or was edited, and is refused
// rather than resumed modulo the owned count.
func TestNextPastOwnedSplits(t *testing.T) {
	for _, tc := range []struct{ rank, world, splits, next int }{{0, 1, 1, 1}, {1, 2, 4, 2}, {3, 4, 64, 16}, {0, 2, 8, 100}} {
		st := testState(tc.rank, tc.world, tc.splits)
		st.Next = tc.next
		if err := st.Validate(); err == nil || !strings.Contains(err.Error(), "next") {
			t.Errorf("rank %d of %d, %d splits, next %d: %v, want an error naming next", tc.rank, tc.world, tc.splits, tc.next, err)
		}
		st.Next = tc.splits/tc.world - 1
		if err := st.Validate(); err != nil {
			t.Errorf("rank %d of %d, %d splits, next %d (its last split): %v", tc.rank, tc.world, tc.splits, st.Next, err)
		}
	}
}
