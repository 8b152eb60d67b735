package orc

// SeekCounts returns how many stripe reads started at a row group, and
// how many of those were read again whole.
func SeekCounts() (int64, int64) { return seeks.Load(), reseeks.Load() }
