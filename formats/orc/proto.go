package orc

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// The messages of ORC's orc_proto.proto that a reader needs, parsed by hand
// with protowire: the file tail is a handful of small messages, and a
// generated package would bring the whole descriptor machinery for them.
// Only the fields sluice uses are kept; unknown fields are skipped, as
// protobuf requires.

// compressionKind values of PostScript.compression.
const (
	compNone   = 0
	compZlib   = 1
	compSnappy = 2
	compLZO    = 3
	compLZ4    = 4
	compZstd   = 5
)

var compressionNames = map[uint64]string{compNone: "NONE", compZlib: "ZLIB", compSnappy: "SNAPPY", compLZO: "LZO", compLZ4: "LZ4", compZstd: "ZSTD"}

type postScript struct {
	footerLength     uint64
	compression      uint64
	blockSize        uint64
	version          []uint32
	metadataLength   uint64
	writerVersion    uint32
	stripeStatsLen   uint64
	magic            string
	hasCompression   bool
	hasBlockSize     bool
	hasWriterVersion bool
}

// Type kinds (Type.kind).
const (
	kBoolean = iota
	kByte
	kShort
	kInt
	kLong
	kFloat
	kDouble
	kString
	kBinary
	kTimestamp
	kList
	kMap
	kStruct
	kUnion
	kDecimal
	kDate
	kVarchar
	kChar
	kTimestampInstant
)

var kindNames = []string{"boolean", "tinyint", "smallint", "int", "bigint", "float", "double", "string", "binary", "timestamp", "array", "map", "struct", "uniontype", "decimal", "date", "varchar", "char", "timestamp with local time zone"}

func kindName(k uint64) string {
	if k < uint64(len(kindNames)) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind %d", k)
}

type orcType struct {
	kind       uint64
	subtypes   []uint32
	fieldNames []string
	maxLength  uint64
	precision  uint64
	scale      uint64
	// icebergID is the Iceberg field id the type's "iceberg.id" attribute
	// gives (Iceberg's ORC writers set it), or -1.
	icebergID int
}

type stripeInfo struct {
	offset, indexLength, dataLength, footerLength, rows uint64
}

type footer struct {
	headerLength   uint64
	contentLength  uint64
	stripes        []stripeInfo
	types          []orcType
	rows           uint64
	rowIndexStride uint64
	writer         uint64
	hasWriter      bool
	encrypted      bool
	software       string
}

// Stream kinds (Stream.kind).
const (
	sPresent        = 0
	sData           = 1
	sLength         = 2
	sDictionaryData = 3
	sDictCount      = 4
	sSecondary      = 5
	sRowIndex       = 6
	sBloomFilter    = 7
	sBloomUTF8      = 8
	sEncryptedIndex = 9
	sEncryptedData  = 10
)

type stream struct {
	kind, column, length uint64
}

// Column encoding kinds.
const (
	eDirect       = 0
	eDictionary   = 1
	eDirectV2     = 2
	eDictionaryV2 = 3
)

type encoding struct {
	kind, dictSize uint64
}

type stripeFooter struct {
	streams   []stream
	columns   []encoding
	writerTZ  string
	encrypted bool
}

var errProto = errors.New("malformed protobuf")

// fields calls fn for each field of the message in b; fn consumes the
// field's value from the slice it is given and returns the rest.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, b []byte) (int, error)) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: tag: %w", errProto, protowire.ParseError(n))
		}
		b = b[n:]
		used, err := fn(num, typ, b)
		if err != nil {
			return err
		}
		if used < 0 { // not used by fn: skip it
			used = protowire.ConsumeFieldValue(num, typ, b)
			if used < 0 {
				return fmt.Errorf("%w: field %d: %w", errProto, num, protowire.ParseError(used))
			}
		}
		b = b[used:]
	}
	return nil
}

func varintField(typ protowire.Type, b []byte, dst *uint64) (int, error) {
	if typ != protowire.VarintType {
		return -1, nil
	}
	v, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return 0, fmt.Errorf("%w: varint: %w", errProto, protowire.ParseError(n))
	}
	*dst = v
	return n, nil
}

func bytesField(typ protowire.Type, b []byte) ([]byte, int, error) {
	if typ != protowire.BytesType {
		return nil, -1, nil
	}
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return nil, 0, fmt.Errorf("%w: length-delimited field: %w", errProto, protowire.ParseError(n))
	}
	return v, n, nil
}

// repeatedUint appends the values of a repeated integer field, packed or
// not, with at most limit values in all.
func repeatedUint(typ protowire.Type, b []byte, dst *[]uint64, limit int) (int, error) {
	switch typ {
	case protowire.VarintType:
		var v uint64
		n, err := varintField(typ, b, &v)
		if err == nil {
			*dst = append(*dst, v)
		}
		if len(*dst) > limit {
			return 0, fmt.Errorf("%w: more than %d values in a repeated field", errProto, limit)
		}
		return n, err
	case protowire.BytesType:
		p, n, err := bytesField(typ, b)
		if err != nil {
			return 0, err
		}
		for len(p) > 0 {
			v, m := protowire.ConsumeVarint(p)
			if m < 0 {
				return 0, fmt.Errorf("%w: packed varint: %w", errProto, protowire.ParseError(m))
			}
			*dst = append(*dst, v)
			if len(*dst) > limit {
				return 0, fmt.Errorf("%w: more than %d values in a repeated field", errProto, limit)
			}
			p = p[m:]
		}
		return n, nil
	}
	return -1, nil
}

func parsePostScript(b []byte) (*postScript, error) {
	ps := &postScript{}
	err := fields(b, func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		switch num {
		case 1:
			return varintField(typ, b, &ps.footerLength)
		case 2:
			ps.hasCompression = true
			return varintField(typ, b, &ps.compression)
		case 3:
			ps.hasBlockSize = true
			return varintField(typ, b, &ps.blockSize)
		case 4:
			var vs []uint64
			n, err := repeatedUint(typ, b, &vs, 16)
			for _, v := range vs {
				ps.version = append(ps.version, uint32(min(v, math.MaxUint32)))
			}
			return n, err
		case 5:
			return varintField(typ, b, &ps.metadataLength)
		case 6:
			var v uint64
			n, err := varintField(typ, b, &v)
			ps.writerVersion, ps.hasWriterVersion = uint32(min(v, math.MaxUint32)), true
			return n, err
		case 7:
			return varintField(typ, b, &ps.stripeStatsLen)
		case 8000:
			s, n, err := bytesField(typ, b)
			ps.magic = string(s)
			return n, err
		}
		return -1, nil
	})
	if err != nil {
		return nil, err
	}
	return ps, nil
}

// maxTypes bounds the types of a schema: a footer that claims more is
// refused before anything is sized by it.
const maxTypes = 1 << 20

func parseFooter(b []byte) (*footer, error) {
	ft := &footer{}
	err := fields(b, func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		switch num {
		case 1:
			return varintField(typ, b, &ft.headerLength)
		case 2:
			return varintField(typ, b, &ft.contentLength)
		case 3:
			m, n, err := bytesField(typ, b)
			if err != nil || n < 0 {
				return n, err
			}
			si, err := parseStripeInfo(m)
			if err != nil {
				return 0, fmt.Errorf("stripe %d: %w", len(ft.stripes), err)
			}
			ft.stripes = append(ft.stripes, si)
			return n, nil
		case 4:
			m, n, err := bytesField(typ, b)
			if err != nil || n < 0 {
				return n, err
			}
			t, err := parseType(m)
			if err != nil {
				return 0, fmt.Errorf("type %d: %w", len(ft.types), err)
			}
			if len(ft.types) >= maxTypes {
				return 0, fmt.Errorf("%w: more than %d types", errProto, maxTypes)
			}
			ft.types = append(ft.types, t)
			return n, nil
		case 6:
			return varintField(typ, b, &ft.rows)
		case 8:
			return varintField(typ, b, &ft.rowIndexStride)
		case 9:
			ft.hasWriter = true
			return varintField(typ, b, &ft.writer)
		case 10:
			ft.encrypted = true
			return -1, nil
		case 12:
			s, n, err := bytesField(typ, b)
			ft.software = string(s)
			return n, err
		}
		return -1, nil
	})
	if err != nil {
		return nil, err
	}
	return ft, nil
}

func parseStripeInfo(b []byte) (stripeInfo, error) {
	var si stripeInfo
	err := fields(b, func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		switch num {
		case 1:
			return varintField(typ, b, &si.offset)
		case 2:
			return varintField(typ, b, &si.indexLength)
		case 3:
			return varintField(typ, b, &si.dataLength)
		case 4:
			return varintField(typ, b, &si.footerLength)
		case 5:
			return varintField(typ, b, &si.rows)
		}
		return -1, nil
	})
	return si, err
}

func parseType(b []byte) (orcType, error) {
	t := orcType{icebergID: -1}
	var subs []uint64
	err := fields(b, func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		switch num {
		case 1:
			return varintField(typ, b, &t.kind)
		case 2:
			return repeatedUint(typ, b, &subs, maxTypes)
		case 3:
			s, n, err := bytesField(typ, b)
			if n >= 0 && err == nil {
				t.fieldNames = append(t.fieldNames, string(s))
			}
			return n, err
		case 4:
			return varintField(typ, b, &t.maxLength)
		case 5:
			return varintField(typ, b, &t.precision)
		case 6:
			return varintField(typ, b, &t.scale)
		case 7: // attributes: StringPair{key = 1, value = 2}
			m, n, err := bytesField(typ, b)
			if n < 0 || err != nil {
				return n, err
			}
			var key, val []byte
			err = fields(m, func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
				switch num {
				case 1:
					v, n, err := bytesField(typ, b)
					key = v
					return n, err
				case 2:
					v, n, err := bytesField(typ, b)
					val = v
					return n, err
				}
				return -1, nil
			})
			if err == nil && string(key) == "iceberg.id" {
				if id, perr := strconv.ParseInt(string(val), 10, 32); perr == nil && id >= 0 {
					t.icebergID = int(id)
				}
			}
			return n, err
		}
		return -1, nil
	})
	for _, s := range subs {
		if s >= maxTypes {
			return t, fmt.Errorf("%w: subtype %d", errProto, s)
		}
		t.subtypes = append(t.subtypes, uint32(s))
	}
	return t, err
}

func parseStripeFooter(b []byte) (*stripeFooter, error) {
	sf := &stripeFooter{}
	err := fields(b, func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		switch num {
		case 1:
			m, n, err := bytesField(typ, b)
			if err != nil || n < 0 {
				return n, err
			}
			var s stream
			err = fields(m, func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
				switch num {
				case 1:
					return varintField(typ, b, &s.kind)
				case 2:
					return varintField(typ, b, &s.column)
				case 3:
					return varintField(typ, b, &s.length)
				}
				return -1, nil
			})
			sf.streams = append(sf.streams, s)
			return n, err
		case 2:
			m, n, err := bytesField(typ, b)
			if err != nil || n < 0 {
				return n, err
			}
			var e encoding
			err = fields(m, func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
				switch num {
				case 1:
					return varintField(typ, b, &e.kind)
				case 2:
					return varintField(typ, b, &e.dictSize)
				}
				return -1, nil
			})
			sf.columns = append(sf.columns, e)
			return n, err
		case 3:
			s, n, err := bytesField(typ, b)
			sf.writerTZ = string(s)
			return n, err
		case 4:
			sf.encrypted = true
			return -1, nil
		}
		return -1, nil
	})
	if err != nil {
		return nil, err
	}
	return sf, nil
}

// parseRowIndex returns the positions of each row group entry of a column's
// ROW_INDEX stream.
func parseRowIndex(b []byte) ([][]uint64, error) {
	var out [][]uint64
	err := fields(b, func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		if num != 1 {
			return -1, nil
		}
		m, n, err := bytesField(typ, b)
		if err != nil || n < 0 {
			return n, err
		}
		var pos []uint64
		err = fields(m, func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
			if num == 1 {
				return repeatedUint(typ, b, &pos, 1<<16)
			}
			return -1, nil
		})
		out = append(out, pos)
		return n, err
	})
	return out, err
}

// countStripeStats checks the Metadata message (stripe statistics) and
// returns how many stripes it describes.
func countStripeStats(b []byte) (int, error) {
	n := 0
	err := fields(b, func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		if num != 1 {
			return -1, nil
		}
		_, used, err := bytesField(typ, b)
		if used >= 0 && err == nil {
			n++
		}
		return used, err
	})
	return n, err
}
