package storage_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/storage"
)

// This test binary links no cloud driver, as a program that imports none:
// their URLs fail at once, naming the package that links them, and the
// query stays out of the error.
func TestNoDriverLinked(t *testing.T) {
	for url, pkg := range map[string]string{
		"s3://bucket/train/?region=eu-west-1&token=hunter22hunter22": "github.com/sluicedata/sluice/storage/s3",
		"gs://bucket/train/*.parquet?token=hunter22hunter22":         "github.com/sluicedata/sluice/storage/gcs",
		"azblob://container/train/x.parquet?sig=hunter22hunter22":    "github.com/sluicedata/sluice/storage/azure",
	} {
		r := storage.NewResolver(storage.Options{})
		_, err := r.Resolve(context.Background(), url, nil)
		r.Close()
		if !errors.Is(err, storage.ErrNoDriver) {
			t.Errorf("%s: %v, want ErrNoDriver", url, err)
			continue
		}
		bucket, _, _ := strings.Cut(url, "/train")
		if msg := err.Error(); !strings.Contains(msg, `import _ "`+pkg+`"`) || !strings.Contains(msg, "open bucket "+bucket) || strings.Contains(msg, "hunter22") {
			t.Errorf("%s: %q, want an error naming the bucket and the package to import, without the query", url, msg)
		}
	}
}

// A program that imports stream (or checkpoint) links no cloud SDK: only the
// driver packages under storage do. Their SDKs are most of a
// binary's size and hundreds of packages, and a user reading local files
// asked for none of them.
func TestLibraryLinksNoCloudSDK(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go tool is not on PATH (%v): cannot list what stream links", err)
	}
	const mod = "github.com/sluicedata/sluice/"
	out, err := exec.Command(goTool, "list", "-deps", mod+"stream", mod+"checkpoint", mod+"formats", mod+"storage").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list -deps: %v", err)
	}
	sdks := []string{"cloud.google.com/go/storage", "github.com/aws/aws-sdk-go-v2", "github.com/Azure/azure-sdk-for-go",
		"gocloud.dev/blob/s3blob", "gocloud.dev/blob/gcsblob", "gocloud.dev/blob/azureblob"}
	n := 0
	for pkg := range strings.FieldsSeq(string(out)) {
		n++
		for _, sdk := range sdks {
			if pkg == sdk || strings.HasPrefix(pkg, sdk+"/") {
				t.Errorf("the library links %s", pkg)
			}
		}
	}
	if n < 50 {
		t.Fatalf("go list -deps listed %d packages: %q", n, out)
	}
}
