// Package storage is the object-store access beneath the formats and the
// checkpoint store: it turns URLs, directories and globs into sorted object
// lists, and serves range reads of one object as an io.ReaderAt. Everything
// goes through the small Bucket interface so that byte accounting
// (Counting), fault injection, a bound on requests in flight and retries
// (RetryPolicy, Transient) wrap it. It knows no file format, and imports no
// other package of sluice.
//
// # URLs
//
// A Resolver takes:
//
//   - plain paths, relative or absolute, and file:///abs/path URLs: the
//     local file system;
//   - mem:// URLs: gocloud.dev's in-memory buckets, for tests (each open is a
//     new, empty bucket unless Options.Open returns one it keeps);
//   - s3://, gs:// and azblob:// URLs, once the program links their drivers
//     (below);
//   - any other scheme gocloud.dev's URL mux knows, where the program links
//     its gocloud driver itself, or Options.Open opens it.
//
// A URL names one object, else a folder (a key with a trailing slash, or one
// that is no object, is listed as a prefix), or a glob of objects (*, ? or
// [...] in the key). Listing a folder skips names with a part that starts
// with '.' or '_' (Spark's _SUCCESS, checksum files).
//
// # Cloud drivers
//
// A program links the cloud backends it reads, and only those, by importing
// their driver packages, as with gocloud.dev/blob/s3blob:
//
//	import _ "github.com/sluicedata/sluice/storage/s3"    // s3://
//	import _ "github.com/sluicedata/sluice/storage/gcs"   // gs://
//	import _ "github.com/sluicedata/sluice/storage/azure" // azblob://
//
// Each links gocloud's URL opener and the backend's SDK, and registers what
// sluice adds for it (see Driver); its documentation lists the URL's
// options and the credentials and environment it reads. A URL whose driver
// is not linked fails to open, wrapping ErrNoDriver, with an error that names
// the package to import. Options.Open replaces only the opening: a program
// that opens S3 buckets itself still imports the s3 package, so that
// refusals are told from server faults. OpenBucket opens a bucket URL the
// same way for callers that want the gocloud bucket itself, as checkpoint's
// bucket store does.
//
// # Versions
//
// A listing or a stat records each object's version (Object.Version: the
// ETag on S3 and Azure, the generation on GCS, a local file's inode beside
// its size and modification time), and every read of the object is of that
// version: the drivers ask the store for it with a condition on the request
// (Driver.PrepareRead) and check the version of the answer; a local file is
// checked on the open file before and after each read. A read that finds
// another version fails, unretried, wrapping ErrChanged, so that a dataset
// rewritten under a running job is an error, never rows of two versions.
//
// # Credentials
//
// This package reads no credentials and no environment variable: the
// drivers' SDKs do, as their packages say. A URL's query and user
// information may carry secrets (a SAS token, a signature), so errors show
// URLs without them; only a few option values known to hold none (region,
// domain, ...) stay readable.
package storage
