package faults

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Answer is how a cloud's object store says it is throttling a request.
type Answer struct {
	// Name names the answer in logs and tests.
	Name   string
	Status int
	// Header is set on the answer besides Retry-After.
	Header http.Header
	// Body is the answer's body, as the store writes it.
	Body string
	// SignedHost is set for a store whose requests are signed with their
	// Host header (S3's Signature Version 4): the proxy passes the host the
	// client named on to the server, where otherwise it names the server
	// (which GCS's emulator routes by).
	SignedHost bool
}

// The throttling answers of the three clouds, as their services write them.
var (
	// S3SlowDown is S3's 503 SlowDown: "reduce your request rate".
	S3SlowDown = Answer{
		Name:       "S3 SlowDown",
		Status:     http.StatusServiceUnavailable,
		Header:     http.Header{"Content-Type": {"application/xml"}},
		Body:       `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><RequestId>0000000000000000</RequestId></Error>`,
		SignedHost: true,
	}
	// GCSTooManyRequests is GCS's 429 from its XML API, which reads use.
	GCSTooManyRequests = Answer{
		Name:   "GCS 429",
		Status: http.StatusTooManyRequests,
		Header: http.Header{"Content-Type": {"application/xml; charset=UTF-8"}},
		Body:   `<?xml version='1.0' encoding='UTF-8'?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`,
	}
	// AzureServerBusy is Azure Blob Storage's 503 ServerBusy.
	AzureServerBusy = Answer{
		Name:   "Azure ServerBusy",
		Status: http.StatusServiceUnavailable,
		Header: http.Header{"Content-Type": {"application/xml"}, "X-Ms-Error-Code": {"ServerBusy"}},
		Body:   `<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code><Message>Ingress is over the account limit.</Message></Error>`,
	}
)

// Proxy is an HTTP server in front of an object store's server that
// answers some of the requests itself, as the cloud does when it throttles:
// the SDK, the driver and sluice's retries see the real answer. Point the
// bucket URL's endpoint (S3's endpoint, Azure's domain,
// STORAGE_EMULATOR_HOST for GCS) at Addr.
type Proxy struct {
	// Addr is the proxy's host:port.
	Addr string
	// Answer is what a throttled request gets.
	Answer Answer

	mu         sync.Mutex
	retryAfter time.Duration
	r          *rand.Rand
	rate       float64
	first      int // the first requests throttled whatever the rate
	throttl    func(*http.Request) bool
	log        []Request
	srv        *http.Server
	ln         net.Listener
	conns      atomic.Int64
}

// Request is one request the proxy saw.
type Request struct {
	At        time.Time
	Method    string
	Path      string
	Range     string
	Throttled bool
}

// rangeOf is the byte range a request reads: Azure's SDK names it in
// x-ms-range.
func rangeOf(r *http.Request) string {
	if v := r.Header.Get("Range"); v != "" {
		return v
	}
	return r.Header.Get("X-Ms-Range")
}

// NewProxy starts a proxy to target (a URL, http://host:port) that
// throttles requests at the given rate, drawn with the seed. Only range
// reads (GETs with a Range or x-ms-range header) are throttled: listings, HEADs and
// writes pass. Close stops it.
func NewProxy(target string, answer Answer, rate float64, seed uint64) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		Addr:    ln.Addr().String(),
		Answer:  answer,
		r:       rand.New(rand.NewPCG(seed, seed^0x7e57)),
		rate:    rate,
		throttl: func(r *http.Request) bool { return r.Method == http.MethodGet && rangeOf(r) != "" },
		ln:      ln,
	}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(u)
		if answer.SignedHost {
			pr.Out.Host = pr.In.Host
		}
	}}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hit, wait := p.throttle(r); hit {
			p.answer(w, wait)
			return
		}
		rp.ServeHTTP(w, r)
	})}
	p.srv.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			p.conns.Add(1)
		}
	}
	go p.srv.Serve(ln)
	return p, nil
}

// ThrottleFirst throttles the next n requests the proxy would throttle at
// all, whatever the rate: a storm that has an end.
func (p *Proxy) ThrottleFirst(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.first = n
}

// SetRetryAfter has the throttling answers ask for wait, if positive, in
// Retry-After (whole seconds, as the header takes them, rounded up) and in
// Azure's x-ms-retry-after-ms.
func (p *Proxy) SetRetryAfter(wait time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.retryAfter = wait
}

// SetRate changes the fraction of requests throttled.
func (p *Proxy) SetRate(rate float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate = rate
}

// throttle decides whether r is throttled, and how long its answer asks to
// wait.
func (p *Proxy) throttle(r *http.Request) (bool, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hit := false
	if p.throttl(r) {
		switch {
		case p.first > 0:
			p.first--
			hit = true
		case p.rate > 0:
			hit = p.r.Float64() < p.rate
		}
	}
	p.log = append(p.log, Request{At: time.Now(), Method: r.Method, Path: r.URL.Path, Range: rangeOf(r), Throttled: hit})
	return hit, p.retryAfter
}

func (p *Proxy) answer(w http.ResponseWriter, wait time.Duration) {
	for k, vs := range p.Answer.Header {
		w.Header()[k] = vs
	}
	if wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		w.Header().Set("X-Ms-Retry-After-Ms", strconv.FormatInt(wait.Milliseconds(), 10))
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(p.Answer.Body)))
	w.WriteHeader(p.Answer.Status)
	fmt.Fprint(w, p.Answer.Body)
}

// Requests is what the proxy saw so far, in order.
func (p *Proxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.log...)
}

// Conns is how many connections clients opened to the proxy so far: what a
// client's idle pool saves shows here.
func (p *Proxy) Conns() int { return int(p.conns.Load()) }

// Close stops the proxy and its connections.
func (p *Proxy) Close() error { return p.srv.Close() }
