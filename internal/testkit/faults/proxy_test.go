package faults

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The proxy answers range reads it throttles as the cloud would, passes the
// rest to the server, and logs every request.
func TestProxy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "from the server "+r.Host)
	}))
	defer srv.Close()
	p, err := NewProxy(srv.URL, AzureServerBusy, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetRetryAfter(1500 * time.Millisecond)
	p.ThrottleFirst(1)
	get := func(header string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+p.Addr+"/c/k", nil)
		if header != "" {
			req.Header.Set(header, "bytes=0-9")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	if res, body := get(""); res.StatusCode != 200 || !strings.HasPrefix(body, "from the server") {
		t.Fatalf("a GET without a range: %d %q, want the server's answer", res.StatusCode, body)
	}
	res, body := get("X-Ms-Range")
	if res.StatusCode != 503 || res.Header.Get("X-Ms-Error-Code") != "ServerBusy" || res.Header.Get("Retry-After") != "2" ||
		res.Header.Get("X-Ms-Retry-After-Ms") != "1500" || !strings.Contains(body, "<Code>ServerBusy</Code>") {
		t.Fatalf("the throttled read: %d %v %q", res.StatusCode, res.Header, body)
	}
	if res, _ := get("Range"); res.StatusCode != 200 {
		t.Fatalf("after the storm: %d", res.StatusCode)
	}
	p.SetRate(1)
	if res, _ := get("Range"); res.StatusCode != 503 {
		t.Fatalf("at rate 1: %d", res.StatusCode)
	}
	log := p.Requests()
	if len(log) != 4 || log[0].Throttled || !log[1].Throttled || log[1].Range != "bytes=0-9" || log[2].Throttled || !log[3].Throttled {
		t.Fatalf("log %+v", log)
	}
	http.DefaultClient.CloseIdleConnections()
}
