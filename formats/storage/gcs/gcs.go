// Package gcs is the old path of github.com/sluicedata/sluice/storage/gcs,
// kept for one release: importing it for its side effect links the
// Google Cloud Storage driver for gs:// URLs, as the new path does.
//
// Deprecated: import _ "github.com/sluicedata/sluice/storage/gcs" instead.
package gcs

import _ "github.com/sluicedata/sluice/storage/gcs" // registers the driver
