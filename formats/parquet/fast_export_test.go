package parquet

// FastChunks is how many column chunks flatdecode has decoded so far.
func FastChunks() int64 { return fastChunks.Load() }
