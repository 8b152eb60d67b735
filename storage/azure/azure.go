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
// from the environment. The query reaches gocloud's opener as it is (it
// takes domain, protocol, cdn, localemu and storage_account, and refuses
// others); sluice never shows it in an error. The container client is
// sluice's own, the credentials chosen as gocloud's opener chooses them, so
// that reads keep a pool of idle connections as large as the requests
// sluice keeps in flight (the SDK's default keeps 10 per host).
package azure

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	azblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"gocloud.dev/blob/azureblob"

	"github.com/sluicedata/sluice/storage"
)

func init() {
	storage.Register(storage.Driver{
		Scheme:      azureblob.Scheme,
		Open:        open,
		HTTPStatus:  httpStatus,
		HTTPHeader:  httpHeader,
		Permanent:   permanent,
		Version:     version,
		VersionName: "ETag",
		PrepareRead: prepareRead,
	})
}

// version is a blob's ETag, as a listing, its properties or a download
// give it, quoted as HTTP quotes it (a listing leaves the quotes off).
func version(as func(any) bool) string {
	var tag *azcore.ETag
	var item container.BlobItem
	var props azblob.GetPropertiesResponse
	var dl azblob.DownloadStreamResponse
	switch {
	case as(&item):
		if item.Properties != nil {
			tag = item.Properties.ETag
		}
	case as(&props):
		tag = props.ETag
	case as(&dl):
		tag = dl.ETag
	}
	if tag == nil || *tag == "" {
		return ""
	}
	return `"` + strings.Trim(string(*tag), `"`) + `"`
}

// prepareRead downloads on condition that the blob still has the planned
// ETag (If-Match: Azure answers 412 ConditionNotMet where it has not), and
// turns the pipeline's retries off for the request, which would otherwise
// retry each of sluice's attempts.
func prepareRead(ctx context.Context, etag string) (context.Context, func(as func(any) bool) error) {
	ctx = policy.WithRetryOptions(ctx, policy.RetryOptions{MaxRetries: -1})
	return ctx, func(as func(any) bool) error {
		var opts *azblob.DownloadStreamOptions
		if etag == "" || !as(&opts) {
			return nil
		}
		if opts.AccessConditions == nil {
			opts.AccessConditions = &azblob.AccessConditions{}
		}
		if opts.AccessConditions.ModifiedAccessConditions == nil {
			opts.AccessConditions.ModifiedAccessConditions = &azblob.ModifiedAccessConditions{}
		}
		tag := azcore.ETag(etag)
		opts.AccessConditions.ModifiedAccessConditions.IfMatch = &tag
		return nil
	}
}

func httpHeader(err error) http.Header {
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.RawResponse != nil {
		return re.RawResponse.Header
	}
	return nil
}

// permanent reports an error that Azure's SDK marks not to be retried
// (its errorinfo.NonRetriable, an internal interface): a default credential
// chain that finds no credential, a token it will not send over plain HTTP,
// a credential that failed to authenticate. The SDK's own retry policy
// gives up on these at once, the credentials having retried whatever a
// retry could mend; sluice's does too, so that a missing credential shows
// after one attempt, not six.
func permanent(err error) bool {
	var nr interface{ NonRetriable() }
	return errors.As(err, &nr)
}

func httpStatus(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}
