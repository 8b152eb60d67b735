package parquet

import "github.com/sluicedata/sluice/formats/parquet/internal/flatdecode"

// FastChunks is how many column chunks flatdecode has decoded so far.
func FastChunks() int64 { return fastChunks.Load() }

// PagedChunks is how many of them it read from pages fetched one by one.
func PagedChunks() int64 { return pagedChunks.Load() }

// SpreadBatches is how many batches had their columns decoded on more
// than one goroutine.
func SpreadBatches() int64 { return spreadBatches.Load() }

// RecycledBuffers is how many fetched buffers have been handed to later
// fetches.
func RecycledBuffers() int64 { return recycledBufs.Load() }

// HoldDecodes counts n more decodes under way, as if other reads took the
// cores, until the returned func is called.
func HoldDecodes(n int64) func() {
	decoding.Add(n)
	return func() { decoding.Add(-n) }
}

// LentBatches is how many batches flatdecode built of dictionary bytes.
func LentBatches() int64 { return flatdecode.LentBatches() }

// LentPagesOut is how many pages lent to the pipeline's batches are not
// yet back in the pool.
func LentPagesOut() int64 { return flatdecode.LentPagesOut() }

// PagesDecompressed is how many data pages flatdecode has decompressed.
func PagesDecompressed() int64 { return flatdecode.PagesDecompressed() }

// DictionariesDecoded is how many dictionary pages flatdecode has decoded.
func DictionariesDecoded() int64 { return flatdecode.DictionariesDecoded() }

// DeclinePaged has flatdecode decline the row groups fetched page by page,
// until the returned func is called.
func DeclinePaged() func() {
	declinePaged.Store(true)
	return func() { declinePaged.Store(false) }
}
