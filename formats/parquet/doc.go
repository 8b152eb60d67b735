// Package parquet is the formats driver for Apache Parquet files (.parquet,
// .parq, .pq), on arrow-go, and the one package stream uses when
// Options.Formats names no other. Its one job is to turn a Parquet file into
// what the planner needs and back into Arrow batches: Inspect parses the
// footer once, at plan time (row groups as units with exact row counts,
// their stored bytes, the page index where the file has one); Fetch gets a
// read's column chunks in a few coalesced range requests, only the pages of
// its rows where a split boundary cuts a row group and the offset index
// says where they lie; Decode hands the fetched bytes to arrow-go as Arrow
// batches; Prune rules out row groups and pages by statistics and bloom
// filters before anything of them is fetched.
//
// The driver also guards arrow-go: it checks the page headers it hands it
// (a damaged one fails the read naming the file, row group, column and
// byte), refuses strings that are not UTF-8 unless told to replace them,
// reads INT96 timestamps as Spark and DuckDB do, and works around the valid
// files arrow-go refuses; docs/formats.md lists each case.
//
// It may import formats (and formats/internal), filter and storage; never
// stream or the packages that decide the order, of which a driver knows
// nothing, so that a driver like this one could live outside the module.
package parquet
