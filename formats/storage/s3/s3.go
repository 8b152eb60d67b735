// Package s3 is the old path of github.com/sluicedata/sluice/storage/s3,
// kept for one release: importing it for its side effect links the
// S3 driver for s3:// URLs, as the new path does.
//
// Deprecated: import _ "github.com/sluicedata/sluice/storage/s3" instead.
package s3

import _ "github.com/sluicedata/sluice/storage/s3" // registers the driver
