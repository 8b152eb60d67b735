package main

import (
	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/avro"
	"github.com/sluicedata/sluice/formats/orc"
	"github.com/sluicedata/sluice/formats/parquet"
)

// dataFormats are the drivers the commands read, tried in order by file
// name (a file named explicitly that none matches by what its first bytes
// are: a magic number, else text).
var dataFormats = []formats.Format{parquet.Format{}, orc.Format{}, avro.Format{}}

// orcWithoutRowIndex lists the ORC files that have no row index: a stripe
// of theirs that a split boundary cuts is fetched whole by each side.
func orcWithoutRowIndex(files []*formats.Fragment) []string {
	var out []string
	for _, f := range files {
		if stride, ok := orc.RowIndexStride(f); ok && stride == 0 {
			out = append(out, f.URL)
		}
	}
	return out
}
