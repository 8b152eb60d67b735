// Package typed decodes a stream's Arrow record batches into Go values the
// caller owns: Structs into the caller's struct type, Rows into maps from
// column name to value, and Matrices into dense row-major float32 matrices.
// Each reads a Source (a *stream.Dataset or a *stream.Mixed) and yields one
// output per batch, in exactly the order of the source's Batches: breaking
// out of the loop keeps the position, as it does there. From a dataset the
// batches decode in parallel on its transform goroutines (see Mapper).
//
//	for rows, err := range typed.Structs[Example](ctx, ds) { ... } // []Example per batch
//	for rows, err := range typed.Rows(ctx, ds) { ... }             // []map[string]any per batch
//	for m, err := range typed.Matrices(ctx, ds, cols) { ... }      // Matrix per batch
//
// Every output is a copy in Go memory: nothing it holds aliases an Arrow
// buffer, so it stays valid after the batch it came from is released.
//
// # The Go values of Arrow types
//
//	Arrow type                          Rows        Structs fields             Matrices
//	int8, int16, int32, int64           int64       ints of as many bits or    float32
//	uint8, uint16, uint32               int64       more, floats exact for     float32
//	uint64                              uint64      every value (see Structs)  float32
//	float16, float32                    float64     float32, float64           float32
//	float64                             float64     float64                    float32
//	bool                                bool        bool                       0 or 1
//	string, large_string, string_view   string      string, []byte             refused
//	binary, large_binary, binary_view,  []byte      string, []byte             refused
//	fixed_size_binary
//	timestamp (any unit)                time.Time   time.Time                  refused
//	date32, date64                      time.Time   time.Time                  refused
//	null                                nil         refused                    refused
//
// A timestamp becomes a time.Time in the column's time zone (UTC where it
// has none), a date one at UTC. A null value is nil in Rows, and nil in a
// Structs field that is a pointer (to any kind above: *int64, *time.Time)
// or a []byte; anywhere else it is an error. Matrices converts as Go's
// float32 conversion does (integers beyond 2^24 and float64 values round).
//
// Structs documents which field kinds each Arrow type converts to. The
// table of Rows lives in internal/govalue, which cmd/sluice prints its JSON
// from as well.
//
// # What is refused, and how it fails
//
// Every output checks its mapping against Source.Schema before it reads a
// batch. A column it cannot convert (lists, structs, maps, decimals,
// dictionaries, times of day, durations; for Matrices anything not numeric
// or bool; for Structs a conversion that is not exact for every value, such
// as int64 into int32 or float64 into float32), a missing or ambiguous
// column, or a field no column maps to: the iteration yields one error
// wrapping ErrOutputMapping that names the column, its Arrow type and, for
// Structs, the field and its Go type, and the source has not moved.
//
// A null that reaches an output that cannot hold it (a non-pointer struct
// field other than []byte, a matrix cell) ends the iteration with an error
// wrapping ErrNullValue that names the column, the row in its batch and the
// field. The first error of the source's own ends the iteration as well.
//
// The errors begin "stream: " and ErrOutputMapping and ErrNullValue read as
// they did when these outputs lived in package stream; package stream keeps
// its old names for them, and for Structs, Rows, Matrices and Matrix, as
// deprecated aliases for one release.
package typed
