// Package e2e holds sluice's end-to-end tests against real object-store
// servers (S3, GCS, Azure Blob), apart from the unit tests of each package
// because they need servers and their SDKs' connection pools: see
// objectstore_test.go, and scripts/objectstores.sh for local servers.
package e2e
