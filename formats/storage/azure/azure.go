// Package azure is the old path of github.com/sluicedata/sluice/storage/azure,
// kept for one release: importing it for its side effect links the
// Azure Blob Storage driver for azblob:// URLs, as the new path does.
//
// Deprecated: import _ "github.com/sluicedata/sluice/storage/azure" instead.
package azure

import _ "github.com/sluicedata/sluice/storage/azure" // registers the driver
