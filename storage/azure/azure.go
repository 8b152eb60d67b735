// Package azure links the Azure Blob Storage backend into sluice: importing
// it for its side effect, as gocloud.dev/blob/azureblob is imported,
//
//	import _ "github.com/sluicedata/sluice/storage/azure"
//
// opens azblob:// URLs in stream.Options.URLs, checkpoint.OpenBucketStoreURL
// and the formats, and lets retries tell a refusal from a server fault.
//
// azblob://CONTAINER/PREFIX
//
// The account comes from AZURE_STORAGE_ACCOUNT (or the storage_account
// parameter) and the credential from AZURE_STORAGE_KEY, a connection string
// (AZURE_STORAGE_CONNECTION_STRING), AZURE_STORAGE_SAS_TOKEN, or else
// azidentity's default chain. The service URL is
// https://ACCOUNT.blob.core.windows.net unless the parameters domain (or
// AZURE_STORAGE_DOMAIN), protocol (or AZURE_STORAGE_PROTOCOL: http or https),
// cdn or localemu (or AZURE_STORAGE_IS_LOCAL_EMULATOR) say otherwise; a domain
// of 127.0.0.1:PORT or localhost:PORT, as Azurite serves, puts the account in
// the path. The first azblob URL a process opens fixes the credential read
// from the environment. The query reaches gocloud's opener as it is; sluice
// never shows it in an error.
package azure

import (
	"errors"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"gocloud.dev/blob/azureblob"

	"github.com/sluicedata/sluice/storage"
)

func init() {
	storage.Register(storage.Driver{Scheme: azureblob.Scheme, HTTPStatus: httpStatus})
}

func httpStatus(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}
