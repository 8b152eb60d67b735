package azure

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"

	"github.com/sluicedata/sluice/storage/internal/httppool"
)

// opener is gocloud's URL opener (its query parameters, their checks and
// the service URL they make) with a client maker of sluice's own, set up on
// the first azblob URL: as with gocloud's default opener, the environment
// read then holds for the process, and one default credential serves every
// container, so that its tokens are fetched once.
var opener = sync.OnceValue(newOpener)

func newOpener() *azureblob.URLOpener {
	svc := azureblob.NewDefaultServiceURLOptions()
	return &azureblob.URLOpener{
		MakeClient:        credentialFromEnv(*svc).client,
		ServiceURLOptions: *svc,
	}
}

// open opens an azblob:// URL with a container client that reads through
// httppool's pool (transport). gocloud's default opener builds its client
// with the SDK's transport, which keeps 10 idle connections per host: of
// each round of sluice's requests in flight, the rest closed their
// connections and the next round opened new ones, a TCP and TLS handshake
// each.
func open(ctx context.Context, bucketURL string) (*blob.Bucket, error) {
	u, err := url.Parse(bucketURL)
	if err != nil {
		return blob.OpenBucket(ctx, bucketURL) // gocloud says what is wrong with it
	}
	return opener().OpenBucketURL(ctx, u)
}

// transport is httppool's, with the TLS settings of the Azure SDK's own
// transport kept: TLS 1.2 at least, and renegotiation when the server asks,
// as Azure front ends have (Go's default refuses it).
var transport = sync.OnceValue(func() http.RoundTripper {
	t, ok := httppool.Transport().(*http.Transport)
	if !ok {
		return httppool.Transport() // the program's own RoundTripper
	}
	t = t.Clone()
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{}
	}
	t.TLSClientConfig.MinVersion = max(t.TLSClientConfig.MinVersion, tls.VersionTLS12)
	t.TLSClientConfig.Renegotiation = tls.RenegotiateFreelyAsClient
	return t
})

// credentialKind is how requests are authorized, chosen from the
// environment in the order gocloud's default opener chooses.
type credentialKind int

const (
	identity         credentialKind = iota // azidentity's default chain
	sharedKey                              // AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY
	sasToken                               // AZURE_STORAGE_SAS_TOKEN, carried in the service URL
	connectionString                       // AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGEBLOB_CONNECTIONSTRING
)

type credential struct {
	kind             credentialKind
	account, key     string
	connectionString string
	// envService is the service URL the environment names. A SAS token
	// is appended to the service URL, so a URL's query must not send it
	// to another origin.
	envService azureblob.ServiceURLOptions

	identityOnce sync.Once
	identity     azcore.TokenCredential
	identityErr  error
}

func credentialFromEnv(svc azureblob.ServiceURLOptions) *credential {
	c := &credential{account: os.Getenv("AZURE_STORAGE_ACCOUNT"), envService: svc}
	cs := os.Getenv("AZURE_STORAGE_CONNECTION_STRING")
	if cs == "" {
		cs = os.Getenv("AZURE_STORAGEBLOB_CONNECTIONSTRING")
	}
	key := os.Getenv("AZURE_STORAGE_KEY")
	switch {
	case c.account != "" && key != "":
		c.kind, c.key = sharedKey, key
	case os.Getenv("AZURE_STORAGE_SAS_TOKEN") != "":
		c.kind = sasToken
	case cs != "":
		c.kind, c.connectionString = connectionString, cs
	}
	return c
}

// client builds the container client for a service URL that gocloud's
// opener made from the environment and the bucket URL's query.
func (c *credential) client(svcURL azureblob.ServiceURL, name azureblob.ContainerName) (*container.Client, error) {
	opts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: &http.Client{Transport: transport()},
	}}
	if c.envService.SASToken != "" {
		// Whatever the credential, the token is in the service URL.
		envURL, err := azureblob.NewServiceURL(&c.envService)
		if err != nil {
			return nil, err
		}
		if !sameOrigin(string(envURL), string(svcURL)) {
			return nil, errors.New("with AZURE_STORAGE_SAS_TOKEN set, a bucket URL cannot change the service endpoint " +
				"(domain, protocol, cdn, localemu, storage_account): set AZURE_STORAGE_DOMAIN, AZURE_STORAGE_PROTOCOL, " +
				"AZURE_STORAGE_IS_CDN, AZURE_STORAGE_IS_LOCAL_EMULATOR or AZURE_STORAGE_ACCOUNT instead")
		}
	}
	containerURL, err := url.JoinPath(string(svcURL), string(name))
	if err != nil {
		return nil, err
	}
	switch c.kind {
	case sharedKey:
		cred, err := container.NewSharedKeyCredential(c.account, c.key)
		if err != nil {
			return nil, fmt.Errorf("AZURE_STORAGE_KEY: %w", err)
		}
		return container.NewClientWithSharedKeyCredential(containerURL, cred, opts)
	case sasToken:
		return container.NewClientWithNoCredential(containerURL, opts)
	case connectionString:
		// The connection string names the endpoint itself.
		return container.NewClientFromConnectionString(c.connectionString, string(name), opts)
	}
	c.identityOnce.Do(func() {
		var cred azcore.TokenCredential
		cred, c.identityErr = azidentity.NewDefaultAzureCredential(nil)
		c.identity = explained{cred}
	})
	if c.identityErr != nil {
		return nil, fmt.Errorf("no Azure credential: %s: %w", credentialHelp, c.identityErr)
	}
	return container.NewClient(containerURL, c.identity, opts)
}

// credentialHelp says where the credentials come from.
const credentialHelp = "set AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or " +
	"AZURE_STORAGE_CONNECTION_STRING, or sign in for azidentity's default chain " +
	"(AZURE_CLIENT_ID, AZURE_TENANT_ID and a secret or certificate, a managed identity, or `az login`)"

// explained is the default credential chain with its failures saying what
// to set: without any credential, the chain's own error lists why each of
// its members could not give a token, which does not say what to do.
type explained struct{ azcore.TokenCredential }

func (e explained) GetToken(ctx context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	tok, err := e.TokenCredential.GetToken(ctx, opts)
	if err != nil {
		return tok, fmt.Errorf("no Azure token (%s): %w", credentialHelp, err)
	}
	return tok, nil
}

func sameOrigin(a, b string) bool {
	ua, err := url.Parse(a)
	if err != nil {
		return false
	}
	ub, err := url.Parse(b)
	if err != nil {
		return false
	}
	return strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Host, ub.Host)
}
