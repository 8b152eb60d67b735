package azure_test

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/sluicedata/sluice/internal/testkit/scratch"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/azure"
)

// credentialEnv are the variables the opener chooses a credential from.
var credentialEnv = []string{
	"AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN",
	"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGEBLOB_CONNECTIONSTRING",
	"AZURE_STORAGE_DOMAIN", "AZURE_STORAGE_PROTOCOL", "AZURE_STORAGE_IS_CDN", "AZURE_STORAGE_IS_LOCAL_EMULATOR",
}

// Each credential the environment can give reads a blob from the local
// Azure server with the bytes written: a shared key, a SAS token (which a
// URL's query cannot send to another endpoint) and a connection string.
func TestCredentialsFromEnv(t *testing.T) {
	sc := scratch.ForTest(t, scratch.Azure, "sluice-creds")
	ctx := context.Background()
	data := []byte("pooled connections, every credential")
	if err := sc.Bucket.WriteAll(ctx, sc.Key+"obj", data, nil); err != nil {
		t.Fatal(err)
	}
	testURL, err := url.Parse(scratch.Azure.URL())
	if err != nil {
		t.Fatal(err)
	}
	domain, protocol := testURL.Query().Get("domain"), testURL.Query().Get("protocol")
	account, key := os.Getenv("AZURE_STORAGE_ACCOUNT"), os.Getenv("AZURE_STORAGE_KEY")
	cred, err := container.NewSharedKeyCredential(account, key)
	if err != nil {
		t.Fatal(err)
	}
	perms := sas.ContainerPermissions{Read: true}
	qp, err := sas.BlobSignatureValues{
		Protocol:      sas.ProtocolHTTPSandHTTP,
		ExpiryTime:    time.Now().Add(time.Hour).UTC(),
		Permissions:   perms.String(),
		ContainerName: testURL.Host,
	}.SignWithSharedKey(cred)
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		env  map[string]string
		url  string
	}{
		{"shared key", map[string]string{"AZURE_STORAGE_ACCOUNT": account, "AZURE_STORAGE_KEY": key}, testURL.String()},
		{"SAS token", map[string]string{"AZURE_STORAGE_ACCOUNT": account, "AZURE_STORAGE_SAS_TOKEN": qp.Encode(),
			"AZURE_STORAGE_DOMAIN": domain, "AZURE_STORAGE_PROTOCOL": protocol}, "azblob://" + testURL.Host},
		{"connection string", map[string]string{"AZURE_STORAGE_CONNECTION_STRING": "DefaultEndpointsProtocol=" + protocol +
			";AccountName=" + account + ";AccountKey=" + key + ";BlobEndpoint=" + protocol + "://" + domain + "/" + account + ";"},
			"azblob://" + testURL.Host},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range credentialEnv {
				t.Setenv(k, c.env[k])
			}
			u, err := url.Parse(c.url)
			if err != nil {
				t.Fatal(err)
			}
			b, err := azure.NewOpener().OpenBucketURL(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			got, err := b.ReadAll(ctx, sc.Key+"obj")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Errorf("read %q, want %q", got, data)
			}
		})
	}

	t.Run("SAS token to another endpoint", func(t *testing.T) {
		for _, k := range credentialEnv {
			t.Setenv(k, "")
		}
		t.Setenv("AZURE_STORAGE_ACCOUNT", account)
		t.Setenv("AZURE_STORAGE_SAS_TOKEN", qp.Encode())
		t.Setenv("AZURE_STORAGE_DOMAIN", domain)
		t.Setenv("AZURE_STORAGE_PROTOCOL", protocol)
		u := &url.URL{Scheme: "azblob", Host: testURL.Host, RawQuery: "domain=elsewhere.example:443&protocol=https"}
		b, err := azure.NewOpener().OpenBucketURL(ctx, u)
		if err == nil {
			b.Close()
			t.Fatal("a URL sent the SAS token to another endpoint")
		}
		if !strings.Contains(err.Error(), "AZURE_STORAGE_SAS_TOKEN") {
			t.Errorf("the error does not say why: %v", err)
		}
		if strings.Contains(err.Error(), qp.Signature()) {
			t.Errorf("the error shows the SAS signature: %v", err)
		}
	})
}

// Without any credential in the environment, a read fails saying what to
// set, in the error's text, before any request leaves, and at the first
// attempt: no retry can find a credential (nor send a token over plain
// HTTP, the second case, which fails before asking the chain for one).
func TestNoCredential(t *testing.T) {
	for _, k := range credentialEnv {
		t.Setenv(k, "")
	}
	for _, k := range []string{"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_TOKEN_CREDENTIALS"} {
		t.Setenv(k, "") // restored after the test
		os.Unsetenv(k)  // azidentity refuses some of them set empty
	}
	t.Setenv("PATH", t.TempDir()) // no az or azd to ask
	for _, c := range []struct {
		protocol string
		want     []string
	}{
		{"https", []string{"no Azure token", "AZURE_STORAGE_KEY", "az login"}},
		{"http", []string{"https"}},
	} {
		t.Run(c.protocol, func(t *testing.T) {
			u := &url.URL{Scheme: "azblob", Host: "c", RawQuery: "storage_account=acct&domain=127.0.0.1:1&protocol=" + c.protocol}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b, err := azure.NewOpener().OpenBucketURL(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			start := time.Now()
			_, err = b.ReadAll(ctx, "obj")
			t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
			if err == nil {
				t.Fatal("read without a credential succeeded")
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q: %v", want, err)
				}
			}
			if storage.Transient(err) {
				t.Errorf("a missing credential is retried: %v", err)
			}
		})
	}
}
