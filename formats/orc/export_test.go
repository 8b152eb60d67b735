package orc

// SeekCounts returns how many stripe reads started at a row group, and
// how many of those were read again whole.
func SeekCounts() (int64, int64) { return seeks.Load(), reseeks.Load() }

// PartSeeks returns how many decodes of a part of a fetch started at the
// row group that holds the part's first row.
func PartSeeks() int64 { return partSeeks.Load() }
