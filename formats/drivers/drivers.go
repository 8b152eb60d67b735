// Package drivers holds the drivers sluice has built in, by name: what
// Options.Format names and what planning reads with when the caller gives
// no driver of its own. Keeping the set here lets the planner name a driver
// without importing every format itself.
package drivers

import (
	"strings"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/avro"
	"github.com/sluicedata/sluice/formats/orc"
	"github.com/sluicedata/sluice/formats/parquet"
	"github.com/sluicedata/sluice/formats/text"
)

// Names are the built-in drivers' names, in the order error messages list
// them.
var Names = []string{"parquet", "orc", "avro", "csv", "tsv", "jsonl", "json"}

// Default is the driver a dataset is read with when the caller names none:
// Parquet.
func Default() formats.Format { return parquet.Format{} }

// Named is the built-in driver of name (any case) with its default options,
// or nil if there is none.
func Named(name string) formats.Format {
	switch name = strings.ToLower(name); name {
	case "parquet":
		return parquet.Format{}
	case "orc":
		return orc.Format{}
	case "avro":
		return avro.Format{}
	}
	return formats.Named(text.All(text.Options{}), name)
}

// All are every built-in driver, tried in order by file name: Parquet, ORC,
// Avro, then the text formats (CSV, TSV, JSON Lines, JSON) with o. A file
// named explicitly that none matches is read by what its first bytes are
// (formats.PlanOptions.Formats), Parquet where they do not tell.
func All(o text.Options) []formats.Format {
	return append([]formats.Format{parquet.Format{}, orc.Format{}, avro.Format{}}, text.All(o)...)
}
