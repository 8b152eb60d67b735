// Package flatdecode decodes the column chunks of flat Parquet columns (top
// level, not repeated, required or optional) of the common types straight
// into Arrow arrays, below arrow-go's pqarrow: definition levels become the
// validity bitmap run by run, values are written into the array's data
// buffer where they land (dictionary indices gathered from the dictionary in
// one pass), and there is no call per value through an interface.
//
// It takes on a chunk only when all of it is of a shape it reads: Open
// reads every page header first and refuses anything else (another
// encoding, codec or page layout, a header that does not add up), so that
// its caller can hand that chunk to arrow-go before a row of it is decoded.
// What Open accepts and then fails to decode is corrupt: the error names
// the column, the page and its byte offset. OpenPages does the same for
// some pages of a chunk fetched one by one (a read of part of a row group).
package flatdecode
