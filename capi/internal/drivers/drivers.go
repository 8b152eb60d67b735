// Package drivers lists the file formats the C ABI reads: every driver of
// the project, as the CLI has them. It is a package of its own because a
// package imports at most eight of the project's (internal/layers), and
// capi needs its other imports for the errors it names.
package drivers

import (
	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/avro"
	"github.com/sluicedata/sluice/formats/orc"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/formats/text"
)

// All are the drivers tried in order by file name: Parquet, ORC, Avro, then
// the text formats (CSV, TSV, JSON Lines, JSON) with o. A file named
// explicitly that none matches is read as Parquet.
func All(o text.Options) []formats.Format {
	return append([]formats.Format{parquet.Format{}, orc.Format{}, avro.Format{}}, text.All(o)...)
}
