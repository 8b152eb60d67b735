package thrift

// Page types, numbered as in parquet.thrift.
const (
	PageData       = 0
	PageIndex      = 1
	PageDictionary = 2
	PageDataV2     = 3
)

// PageHeader is what the driver reads of a Parquet PageHeader. An integer
// the header does not give is -1 (the counts of a sub-header it lacks, 0).
type PageHeader struct {
	Type, Uncompressed, Compressed int64
	// Size is the header's own bytes: the page's body follows.
	Size int

	// HasData, HasDict and HasV2 say which sub-headers were given:
	// data_page_header, dictionary_page_header, data_page_header_v2.
	HasData, HasDict, HasV2 bool
	// Repeated is set where a sub-header was given twice: its fields are
	// then those of both, the later ones winning.
	Repeated bool

	// Values is num_values, of whichever sub-header.
	Values int64
	// Rows and Nulls are DATA_PAGE_V2's num_rows and num_nulls.
	Rows, Nulls int64
	// Encoding is the values' encoding, of whichever sub-header.
	Encoding int64
	// DefEnc and RepEnc are DATA_PAGE's level encodings.
	DefEnc, RepEnc int64
	// DefLen and RepLen are DATA_PAGE_V2's level lengths in bytes.
	DefLen, RepLen int64
	// CompressedV2 is DATA_PAGE_V2's is_compressed (by default true).
	CompressedV2 bool
}

// ParsePageHeader reads the page header at the start of b. On an error
// the header holds what was read before it; ErrShort says b ended inside
// the header.
func ParsePageHeader(b []byte) (PageHeader, error) {
	h := PageHeader{Type: -1, Uncompressed: -1, Compressed: -1, Encoding: -1, DefEnc: -1, RepEnc: -1, CompressedV2: true}
	r := NewReader(b)
	var sub int16 // the sub-header being read: 5, 7 or 8
	subField := func(id int16, typ byte) error {
		if sub == 8 && id == 7 && (typ == True || typ == False) {
			h.CompressedV2 = typ == True
			return nil
		}
		var dst *int64
		switch {
		case typ != I32:
		case id == 1:
			dst = &h.Values
		case sub == 5 && id == 2, sub == 7 && id == 2, sub == 8 && id == 4:
			dst = &h.Encoding
		case sub == 5 && id == 3:
			dst = &h.DefEnc
		case sub == 5 && id == 4:
			dst = &h.RepEnc
		case sub == 8 && id == 2:
			dst = &h.Nulls
		case sub == 8 && id == 3:
			dst = &h.Rows
		case sub == 8 && id == 5:
			dst = &h.DefLen
		case sub == 8 && id == 6:
			dst = &h.RepLen
		}
		if dst == nil {
			return r.Skip(typ, 2)
		}
		v, err := r.Varint()
		*dst = v
		return err
	}
	err := r.Fields(0, func(id int16, typ byte) error {
		var dst *int64
		switch {
		case id == 1 && typ == I32:
			dst = &h.Type
		case id == 2 && typ == I32:
			dst = &h.Uncompressed
		case id == 3 && typ == I32:
			dst = &h.Compressed
		case (id == 5 || id == 7 || id == 8) && typ == Struct:
			h.Repeated = h.Repeated || (id == 5 && h.HasData) || (id == 7 && h.HasDict) || (id == 8 && h.HasV2)
			h.HasData, h.HasDict, h.HasV2 = h.HasData || id == 5, h.HasDict || id == 7, h.HasV2 || id == 8
			sub = id
			return r.Fields(1, subField)
		default:
			return r.Skip(typ, 1)
		}
		v, err := r.Varint()
		*dst = v
		return err
	})
	h.Size = r.Pos()
	return h, err
}
